package handlers

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Limits of one embeddings request (the body cap applies too).
const (
	maxEmbedInputs    = 256
	maxEmbedInputRune = 32_000
)

// apiCapBody caps a request body before anything parses it, answering in
// OpenAI's shape.
func apiCapBody(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", "The request body is too large.")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		})
	}
}

type apiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// listModels serves GET /v1/models: the chat and embedding models of the
// model servers, in OpenAI's list shape.
func (a *apiEndpoints) listModels(w http.ResponseWriter, r *http.Request) {
	all, err := a.models.List(r.Context())
	if err != nil {
		apiError(w, http.StatusBadGateway, "server_error", "model_server_unreachable", "The model server could not be reached.")
		return
	}
	out := make([]apiModel, 0, len(all))
	for _, m := range all {
		if !m.Has("completion") && !m.Has("embedding") {
			continue
		}
		out = append(out, apiModel{ID: m.Name, Object: "model", Created: m.ModifiedAt.Unix(), OwnedBy: "weft"})
	}
	writeAPIJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

type embedRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
}

// embeddings serves POST /v1/embeddings: a string or an array of strings
// (at most maxEmbedInputs, each at most maxEmbedInputRune characters)
// embedded by an embedding model, floats or base64 of little-endian
// float32s as asked.
func (a *apiEndpoints) embeddings(w http.ResponseWriter, r *http.Request) {
	var req embedRequest
	if !decodeAPIBody(w, r, &req) {
		return
	}
	texts, msg := embedInputs(req.Input)
	if msg != "" {
		apiBadRequest(w, msg)
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		apiBadRequest(w, `encoding_format must be "float" or "base64".`)
		return
	}
	if !a.checkModel(w, r, req.Model, "embedding") {
		return
	}
	// Embedding is model work like an answer: it takes one of the
	// account's run slots, so parallel requests cannot queue up work on
	// the model servers beyond WEFT_MAX_RUNS_PER_USER.
	ctx, release, err := a.rt.APISlot(r.Context(), tokenUse(r).User.ID)
	if err != nil {
		a.completionError(w, r, err, req.Model)
		return
	}
	defer release()
	resp, err := a.rt.Embed(ctx, req.Model, texts)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		if ctx.Err() != nil {
			a.completionError(w, r, stopCause(ctx, err), req.Model)
			return
		}
		apiError(w, http.StatusBadGateway, "server_error", "model_error", a.rt.DescribeFailure(err, req.Model))
		return
	}
	data := make([]map[string]any, len(resp.Embeddings))
	for i, v := range resp.Embeddings {
		var e any = v
		if req.EncodingFormat == "base64" {
			var b bytes.Buffer
			_ = binary.Write(&b, binary.LittleEndian, v)
			e = base64.StdEncoding.EncodeToString(b.Bytes())
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": e}
	}
	a.tokens.WithLabelValues("prompt").Add(float64(resp.PromptEvalCount))
	writeAPIJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": resp.PromptEvalCount, "total_tokens": resp.PromptEvalCount}})
}

// embedInputs reads input: a string or an array of strings.
func embedInputs(raw json.RawMessage) ([]string, string) {
	var texts []string
	var one string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, "input is required: a string or an array of strings."
	case json.Unmarshal(raw, &one) == nil:
		texts = []string{one}
	case json.Unmarshal(raw, &texts) == nil:
	default:
		return nil, "input must be a string or an array of strings (token arrays are not accepted)."
	}
	if len(texts) == 0 || len(texts) > maxEmbedInputs {
		return nil, "input must hold between 1 and " + strconv.Itoa(maxEmbedInputs) + " strings."
	}
	for i, t := range texts {
		if t == "" {
			return nil, "input[" + strconv.Itoa(i) + "] is empty."
		}
		if utf8.RuneCountInString(t) > maxEmbedInputRune {
			return nil, "input[" + strconv.Itoa(i) + "] is longer than " + strconv.Itoa(maxEmbedInputRune) + " characters."
		}
	}
	return texts, ""
}

// checkModel answers 400 without a model, 404 for a model no server has,
// 400 for one without the capability asked (completion, embedding).
func (a *apiEndpoints) checkModel(w http.ResponseWriter, r *http.Request, model, capability string) bool {
	if model == "" {
		apiBadRequest(w, "model is required; GET /v1/models lists them.")
		return false
	}
	has, known := a.models.Supports(r.Context(), model, capability)
	if !known {
		apiNotFound(w, "model_not_found", "The model "+strconv.Quote(model)+" does not exist on this server's model servers; GET /v1/models lists them.")
		return false
	}
	if !has {
		what := "a chat model"
		if capability == "embedding" {
			what = "an embedding model"
		}
		apiBadRequest(w, "The model "+strconv.Quote(model)+" is not "+what+".")
		return false
	}
	return true
}
