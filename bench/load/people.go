package main

import (
	"cmp"
	"context"
	"fmt"
	"sync"
)

// people returns n signed-up persons, registering the missing ones.
func (b *bench) people(ctx context.Context, n int) ([]*person, error) {
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // sign-up hashes with argon2id: 2 cores
	for i := len(b.persons); i < n; i++ {
		p := newPerson(b.e.weftBase, fmt.Sprintf("bench-%s-%d@example.test", b.runID, i), b.tr)
		b.persons = append(b.persons, p)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := p.register(ctx); err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return b.persons[:n], nil
}
