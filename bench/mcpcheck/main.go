// Command mcpcheck connects Weft's MCP client (package mcp) to the servers
// of a WEFT_MCP_CONFIG file, prints each server's state and tools as the
// agent would see them (name, class, why unavailable), and calls tools
// given as NAME JSON-ARGS pairs. It is how Weft was tried against MCP
// servers it did not write (docs/ARCHITECTURE.md, "MCP tools"):
//
//	npm install @modelcontextprotocol/server-everything @modelcontextprotocol/server-filesystem
//	go run ./bench/mcpcheck mcp.json everything__echo '{"message":"hi"}'
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"weft/agent"
	"weft/mcp"
)

type mem struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *mem) Setting(_ context.Context, k, def string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		return v, nil
	}
	return def, nil
}
func (s *mem) SetSetting(_ context.Context, k, v string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return nil
}

func main() {
	servers, err := mcp.LoadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	m := mcp.New(&mem{m: map[string]string{}}, mcp.Config{File: os.Args[1], Servers: servers})
	m.Start(context.Background())
	defer m.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st := m.Status()
		b, _ := json.Marshal(st)
		ready := true
		for _, s := range st.Servers {
			if s.State != "connected" {
				ready = false
			}
		}
		if ready && len(st.Servers) > 0 {
			fmt.Println(string(b)[:min(len(b), 3000)])
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, t := range m.Tools() {
		fmt.Printf("%-40s %-5s unavailable=%q\n", t.Name, t.Class, t.Unavailable)
	}
	call := func(name string, args agent.Args) {
		for _, t := range m.Tools() {
			if t.Name == name {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := t.Run(ctx, &agent.Env{Progress: func(s string) { fmt.Println("  progress:", s) }}, args)
				cancel()
				fmt.Printf("CALL %s → err=%v output=%q\n", name, err, res.Output[:min(300, len(res.Output))])
				return
			}
		}
		fmt.Println("no tool", name)
	}
	for i := 2; i+1 < len(os.Args); i += 2 {
		var a agent.Args
		json.Unmarshal([]byte(os.Args[i+1]), &a)
		call(os.Args[i], a)
	}
}
