package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config names an S3-compatible bucket (AWS S3, MinIO, Ceph, Garage, …).
type S3Config struct {
	// Endpoint is the server: an http:// or https:// URL, or host[:port]
	// (https).
	Endpoint  string
	Bucket    string
	Prefix    string // the keys' prefix, e.g. "weft/" (default "blobs/")
	Region    string // empty: the server's default
	AccessKey string
	SecretKey string
	// Transport, if set, carries the requests (tests).
	Transport http.RoundTripper
}

// S3Blobs is the BlobStore in an S3-compatible bucket: the blob with hash
// ab12…ef is the object Prefix+"ab/ab12…ef". An object is written whole by
// one PUT, so there are no temporary files; every instance pointed at the
// bucket serves every instance's uploads.
type S3Blobs struct {
	client *minio.Client
	bucket string
	prefix string
}

// s3Timeout bounds one request (a read of an opened blob: until Close).
const s3Timeout = 2 * time.Minute

// NewS3Blobs connects to the bucket and checks that it is there.
func NewS3Blobs(ctx context.Context, cfg S3Config) (*S3Blobs, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("media: S3 bucket not set")
	}
	host, secure := cfg.Endpoint, true
	if strings.Contains(cfg.Endpoint, "://") {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("media: the S3 endpoint must be http(s)://host[:port] or host[:port], got %q", cfg.Endpoint)
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	if host == "" {
		return nil, errors.New("media: S3 endpoint not set")
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = "blobs/"
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	client, err := minio.New(host, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    secure,
		Region:    cfg.Region,
		Transport: cfg.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("media: S3 client: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ok, err := client.BucketExists(cctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("media: S3 bucket %q at %s: %w", cfg.Bucket, host, err)
	}
	if !ok {
		return nil, fmt.Errorf("media: S3 bucket %q does not exist at %s", cfg.Bucket, host)
	}
	return &S3Blobs{client: client, bucket: cfg.Bucket, prefix: prefix}, nil
}

var _ BlobStore = (*S3Blobs)(nil)

func (b *S3Blobs) key(sha string) string { return b.prefix + sha[:2] + "/" + sha }

// Put stores data in one PUT. Content stored before is written again,
// which refreshes its modification time (S3 has no touch).
func (b *S3Blobs) Put(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	ctx, cancel := context.WithTimeout(context.Background(), s3Timeout)
	defer cancel()
	_, err := b.client.PutObject(ctx, b.bucket, b.key(sha), bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream", SendContentMd5: true})
	if err != nil {
		return "", fmt.Errorf("media: store blob: %w", err)
	}
	return sha, nil
}

// Open opens a stored blob; its reads share one request context, ended by
// Close (or after s3Timeout).
func (b *S3Blobs) Open(sha string) (BlobFile, error) {
	if !validSHA(sha) {
		return nil, ErrInvalidSHA
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3Timeout)
	obj, err := b.client.GetObject(ctx, b.bucket, b.key(sha), minio.GetObjectOptions{})
	if err != nil {
		cancel()
		return nil, s3Err("open blob", err)
	}
	info, err := obj.Stat()
	if err != nil {
		obj.Close()
		cancel()
		return nil, s3Err("open blob", err)
	}
	return &s3File{Object: obj, cancel: cancel, info: s3Info{name: sha, size: info.Size, mod: info.LastModified}}, nil
}

// Read returns a stored blob's content.
func (b *S3Blobs) Read(sha string) ([]byte, error) {
	f, err := b.Open(sha)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, s3Err("read blob", err)
	}
	return data, nil
}

// Remove deletes a stored blob (S3 does not mind one already gone).
func (b *S3Blobs) Remove(sha string) error {
	if !validSHA(sha) {
		return ErrInvalidSHA
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3Timeout)
	defer cancel()
	if err := b.client.RemoveObject(ctx, b.bucket, b.key(sha), minio.RemoveObjectOptions{}); err != nil && !isNoSuchKey(err) {
		return fmt.Errorf("media: remove blob: %w", err)
	}
	return nil
}

// Walk lists the bucket's blobs under the prefix, in key order (which is
// hash order), skipping keys that are not blobs.
func (b *S3Blobs) Walk(fn func(sha string, size int64, mod time.Time) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // also ends the listing when fn stops the walk
	for obj := range b.client.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix, Recursive: true}) {
		if obj.Err != nil {
			return fmt.Errorf("media: list blobs: %w", obj.Err)
		}
		rest := strings.TrimPrefix(obj.Key, b.prefix)
		shard, sha, ok := strings.Cut(rest, "/")
		if !ok || !validSHA(sha) || shard != sha[:2] {
			continue
		}
		if err := fn(sha, obj.Size, obj.LastModified); err != nil {
			return err
		}
	}
	return nil
}

// CleanTemp has nothing to clean: an object is written whole or not at
// all (a PUT of up to 5 GB is one request; blobs are far smaller).
func (b *S3Blobs) CleanTemp(time.Duration) (int, error) { return 0, nil }

// s3File is an opened object; Close ends its request context.
type s3File struct {
	*minio.Object
	cancel context.CancelFunc
	info   s3Info
}

func (f *s3File) Stat() (fs.FileInfo, error) { return f.info, nil }

func (f *s3File) Close() error {
	err := f.Object.Close()
	f.cancel()
	return err
}

// s3Info is an object's fs.FileInfo.
type s3Info struct {
	name string
	size int64
	mod  time.Time
}

func (i s3Info) Name() string       { return i.name }
func (i s3Info) Size() int64        { return i.size }
func (i s3Info) Mode() fs.FileMode  { return 0o600 }
func (i s3Info) ModTime() time.Time { return i.mod }
func (i s3Info) IsDir() bool        { return false }
func (i s3Info) Sys() any           { return nil }

func isNoSuchKey(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.Code == minio.NoSuchKey || r.StatusCode == http.StatusNotFound && r.Code != minio.NoSuchBucket
}

// s3Err wraps err; a missing object wraps fs.ErrNotExist, as a missing
// local file does.
func s3Err(what string, err error) error {
	if isNoSuchKey(err) {
		return fmt.Errorf("media: %s: %w", what, fs.ErrNotExist)
	}
	return fmt.Errorf("media: %s: %w", what, err)
}
