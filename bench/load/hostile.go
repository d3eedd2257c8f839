package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"weft/internal/hostile"
)

// hostileCost is what one input cost: weft's own CPU (the server process),
// its jailed readers' CPU (children weft waited for), wall time and weft's
// peak RSS while it was handled.
type hostileCost struct {
	status        string
	wall          time.Duration
	cpu, children float64
	hwm           int64
}

// hostile sends every file of the hostile corpus (internal/hostile) as a
// composer attachment and as a knowledge-base upload, one at a time, and
// reports each one's cost against DESIGN §13: no input within the upload
// limits makes the server use more than 1 GB or one core for more than
// 10 s, and the server never exits.
func (b *bench) hostile(ctx context.Context) error {
	r, e := b.r, b.e
	r.section("5. hostile inputs (DESIGN §13: ≤ 1 GB RSS and ≤ 10 s of one core per input, never exits)")
	ps, err := b.people(ctx, b.nextPerson+1)
	if err != nil {
		return err
	}
	p := ps[b.nextPerson]
	b.nextPerson++
	resp, body, err := p.do(ctx, http.MethodPost, "/kb", url.Values{"name": {"hostile"}, "embed_model": {"embedder"}}, false)
	if err != nil {
		return err
	}
	var kb int64
	if _, err := fmt.Sscanf(resp.Header.Get("Location"), "/kb/%d", &kb); err != nil {
		return fmt.Errorf("create a knowledge base: status %d: %.200s", resp.StatusCode, body)
	}
	pid := e.pid()
	measure := func(fn func() (string, error)) (hostileCost, error) {
		resetHWM(pid)
		cpu0, ch0 := cpuSeconds(pid), childSeconds(pid)
		start := time.Now()
		status, err := fn()
		c := hostileCost{status: status, wall: time.Since(start), cpu: cpuSeconds(pid) - cpu0, children: childSeconds(pid) - ch0}
		_, c.hwm = memKB(pid)
		return c, err
	}
	r.printf("%-24s %9s | %-28s | %-28s", "file", "bytes", "attachment: result wall weft-CPU jail-CPU HWM", "knowledge base: the same")
	var worstCPU float64
	var worstHWM int64
	for _, f := range hostile.Corpus() {
		att, err := measure(func() (string, error) {
			resp, err := p.postFile(ctx, "/t", url.Values{"workspace_id": {p.wsID}, "content": {"read this"}, "model": {"vision"}}, f)
			if err != nil {
				return "", err
			}
			if resp.StatusCode == http.StatusSeeOther {
				return "accepted", nil
			}
			return fmt.Sprint(resp.StatusCode), nil
		})
		if err != nil {
			return fmt.Errorf("attach %s: %w", f.Name, err)
		}
		doc, err := measure(func() (string, error) {
			if _, err := p.postFile(ctx, fmt.Sprintf("/kb/%d/upload", kb), nil, f); err != nil {
				return "", err
			}
			return p.documentSettled(ctx, kb, f.Name)
		})
		if err != nil {
			return fmt.Errorf("upload %s: %w", f.Name, err)
		}
		if !e.weftAlive() {
			return fmt.Errorf("weft died on %s:\n%s", f.Name, e.weftLogTail(30))
		}
		r.printf("%-24s %9d | %-8s %s %5.2fs %5.2fs %s | %-8s %s %5.2fs %5.2fs %s", f.Name, len(f.Data),
			att.status, ms(att.wall), att.cpu, att.children, mb(att.hwm),
			doc.status, ms(doc.wall), doc.cpu, doc.children, mb(doc.hwm))
		worstCPU = max(worstCPU, att.cpu, doc.cpu, att.children, doc.children)
		worstHWM = max(worstHWM, att.hwm, doc.hwm)
	}
	r.printf("worst CPU of one input (weft or one jailed reader): %.2f s → %s; worst weft VmHWM %s → %s; weft alive after all: %s",
		worstCPU, verdict(worstCPU <= 10), mb(worstHWM), verdict(worstHWM <= 1<<20), verdict(e.weftAlive()))
	return nil
}

// childSeconds is the CPU of the children pid waited for (cutime+cstime):
// its jailed readers.
func childSeconds(pid int) float64 {
	f, err := statFields(pid)
	if err != nil {
		return 0
	}
	return ticks(f, 13) + ticks(f, 14)
}

// postFile posts a multipart form with one file in the field "files".
func (p *person) postFile(ctx context.Context, path string, fields url.Values, f hostile.File) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, vs := range fields {
		for _, v := range vs {
			_ = mw.WriteField(k, v)
		}
	}
	w, err := mw.CreateFormFile("files", f.Name)
	if err != nil {
		return nil, err
	}
	_, _ = w.Write(f.Data)
	_ = mw.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+path, &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

var kbDocRe = regexp.MustCompile(`data-testid="kb-document"[^>]*data-status="(\w+)"[^>]*>(?s:(.*?))</`)

// documentSettled waits until the knowledge base's document of that name
// is ready or failed, or was refused at upload (no row).
func (p *person) documentSettled(ctx context.Context, kb int64, name string) (string, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, body, err := p.do(ctx, http.MethodGet, fmt.Sprintf("/kb/%d", kb), nil, false)
		if err != nil {
			return "", err
		}
		status := "refused"
		for _, m := range kbDocRe.FindAllStringSubmatch(body, -1) {
			if strings.Contains(m[2], name) {
				status = m[1]
			}
		}
		if status != "queued" && status != "processing" {
			return status, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s still %s after 5 minutes", name, status)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
