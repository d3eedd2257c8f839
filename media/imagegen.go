package media

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ImageGenerator makes images through a server with OpenAI's image API
// (OpenAI itself, or a local one such as LocalAI or a Stable Diffusion
// front end that speaks it).
type ImageGenerator struct {
	URL    string // base, e.g. http://host:8000; requests go to URL+"/v1/images/generations"
	APIKey string // sent as a Bearer token when set (and only to URL's own origin)
	Model  string // left out of the request when empty
	Size   string // e.g. "1024x1024"; left out when empty
	Client *http.Client
}

// maxImageBytes bounds a generated image.
const maxImageBytes = 30 << 20

// ErrNotImage is wrapped when an image server's reply holds something
// that is not a raster image Weft accepts.
var ErrNotImage = errors.New("media: the image server's reply is not an image")

// Generate asks for one image and returns it with its MIME type, sniffed
// from its bytes: the reply's data[0].b64_json, or else its data[0].url
// (fetched, within the same limits; a data: URL is decoded). The result
// must pass Sniff as a PNG, JPEG, GIF or WebP within the dimension limits.
// The time it may take is ctx's.
func (g *ImageGenerator) Generate(ctx context.Context, prompt string) (data []byte, mime string, err error) {
	prompt = strings.TrimSpace(prompt)
	if prompt == "" {
		return nil, "", errors.New("media: an image needs a prompt")
	}
	req := struct {
		Model          string `json:"model,omitempty"`
		Prompt         string `json:"prompt"`
		N              int    `json:"n"`
		Size           string `json:"size,omitempty"`
		ResponseFormat string `json:"response_format"`
	}{g.Model, prompt, 1, g.Size, "b64_json"}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, "", err
	}
	c := remote{what: "image server", base: g.URL, apiKey: g.APIKey, client: g.Client}
	// Base64 takes 4 bytes for 3, plus room for the JSON around it.
	reply, err := c.post(ctx, "/v1/images/generations", body, maxImageBytes/3*4+1<<20)
	if err != nil {
		return nil, "", err
	}
	var resp struct {
		Data []struct {
			B64JSON string `json:"b64_json"`
			URL     string `json:"url"`
		} `json:"data"`
	}
	if err := json.Unmarshal(reply, &resp); err != nil {
		return nil, "", fmt.Errorf("media: the image server's reply is not JSON: %w", err)
	}
	if len(resp.Data) == 0 {
		return nil, "", errors.New("media: the image server's reply holds no image")
	}
	switch d := resp.Data[0]; {
	case d.B64JSON != "":
		data, err = decodeBase64(d.B64JSON)
	case strings.HasPrefix(d.URL, "data:"):
		data, err = decodeDataURL(d.URL)
	case d.URL != "":
		data, err = c.get(ctx, d.URL, maxImageBytes)
	default:
		return nil, "", errors.New("media: the image server's reply holds neither b64_json nor url")
	}
	if err != nil {
		return nil, "", err
	}
	if len(data) > maxImageBytes {
		return nil, "", fmt.Errorf("media: the generated image is %s, over the limit of %s", readableSize(int64(len(data))), readableSize(maxImageBytes))
	}
	s, err := Sniff("generated image", data)
	if err != nil || s.Kind != KindImage {
		if err == nil {
			err = fmt.Errorf("it is a %s", s.Format)
		}
		return nil, "", fmt.Errorf("%w: %w", ErrNotImage, err)
	}
	return data, s.MIME, nil
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		data, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	if err != nil {
		return nil, fmt.Errorf("media: the image server's b64_json is not base64: %w", err)
	}
	return data, nil
}

// decodeDataURL decodes a base64 data: URL (data:image/png;base64,…).
func decodeDataURL(u string) ([]byte, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return nil, errors.New("media: the image server's data: URL is not base64")
	}
	return decodeBase64(payload)
}
