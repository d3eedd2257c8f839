package main

import (
	"strings"
	"testing"
)

// WEFT_S3_BUCKET turns the S3 store on with its endpoint, prefix, region
// and keys (the AWS variables as a fallback); half a configuration stops
// start-up saying what is missing.
func TestS3SettingsAreReadAndHalfAConfigurationIsRefused(t *testing.T) {
	for _, k := range []string{"WEFT_S3_BUCKET", "WEFT_S3_ENDPOINT", "WEFT_S3_PREFIX", "WEFT_S3_REGION", "WEFT_S3_ACCESS_KEY",
		"WEFT_S3_SECRET_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		t.Setenv(k, "")
	}
	c, err := loadConfig()
	if err != nil || c.s3 != nil {
		t.Fatalf("without WEFT_S3_BUCKET: %+v, %v", c.s3, err)
	}
	t.Setenv("WEFT_S3_ENDPOINT", "http://minio:9000")
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "WEFT_S3_ENDPOINT is set but WEFT_S3_BUCKET is not") {
		t.Errorf("an endpoint without a bucket: %v", err)
	}
	t.Setenv("WEFT_S3_BUCKET", "weft-files")
	t.Setenv("WEFT_S3_PREFIX", "prod/")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIA")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	c, err = loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if s := c.s3; s == nil || s.Bucket != "weft-files" || s.Endpoint != "http://minio:9000" || s.Prefix != "prod/" || s.AccessKey != "AKIA" || s.SecretKey != "secret" {
		t.Fatalf("read %+v", c.s3)
	}
	t.Setenv("WEFT_S3_ACCESS_KEY", "weft")
	t.Setenv("WEFT_S3_SECRET_KEY", "weft-secret")
	if c, err = loadConfig(); err != nil || c.s3.AccessKey != "weft" || c.s3.SecretKey != "weft-secret" {
		t.Errorf("Weft's own keys before the AWS ones: %+v, %v", c.s3, err)
	}
	t.Setenv("WEFT_S3_ENDPOINT", "")
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "WEFT_S3_ENDPOINT is not") {
		t.Errorf("a bucket without an endpoint: %v", err)
	}
	t.Setenv("WEFT_S3_ENDPOINT", "http://minio:9000")
	t.Setenv("WEFT_S3_SECRET_KEY", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "set both") {
		t.Errorf("an access key without a secret: %v", err)
	}
}
