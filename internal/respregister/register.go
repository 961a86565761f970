// Package respregister drives Redis clients over keys used as registers,
// for tests that check a RESP server's history with porcupine: every SET
// writes a value unique in the run, every GET records what it read, and
// the operations come back as a checker history (one partition per key).
//
// It is test support: it imports checker and go-redis, and must never be
// imported by code the product runs.
package respregister

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalestore-go/scalestore/checker"
)

// Config is one run.
type Config struct {
	Clients, Keys int
	Duration      time.Duration
	// Dial opens a client's next connection; rng is the client's own, so
	// a random node is a seeded choice.
	Dial func(client int, rng *rand.Rand) *redis.Client
	// OpsPerConn is how many operations a connection serves before the
	// client dials again (0: one connection for the whole run).
	OpsPerConn int
}

// Run drives cfg.Clients clients for cfg.Duration, half SETs and half
// GETs of keys "reg:0".."reg:<Keys-1>", and returns every completed
// operation. The first error of any client stops it and is returned.
func Run(ctx context.Context, cfg Config) ([]checker.Op, error) {
	var (
		mu    sync.Mutex
		ops   []checker.Op
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for cl := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, err := runClient(ctx, cfg, cl, start)
			mu.Lock()
			defer mu.Unlock()
			ops = append(ops, mine...)
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	return ops, first
}

func runClient(ctx context.Context, cfg Config, cl int, start time.Time) ([]checker.Op, error) {
	rng := rand.New(rand.NewSource(int64(cl)))
	var mine []checker.Op
	var seq uint64
	for time.Since(start) < cfg.Duration {
		r := cfg.Dial(cl, rng)
		for n := 0; (cfg.OpsPerConn == 0 || n < cfg.OpsPerConn) && time.Since(start) < cfg.Duration; n++ {
			k := rng.Intn(cfg.Keys)
			key := fmt.Sprintf("reg:%d", k)
			op := checker.Op{Client: cl, Page: uint64(k), Call: time.Now().UnixNano()}
			if rng.Intn(2) == 0 {
				seq++
				op.Kind, op.Value = checker.KindWrite, uint64(cl+1)<<40|seq
				if err := r.Set(ctx, key, strconv.FormatUint(op.Value, 10), 0).Err(); err != nil {
					r.Close()
					return mine, fmt.Errorf("client %d: SET %s: %w", cl, key, err)
				}
			} else {
				op.Kind = checker.KindRead
				v, err := r.Get(ctx, key).Result()
				switch {
				case errors.Is(err, redis.Nil):
				case err != nil:
					r.Close()
					return mine, fmt.Errorf("client %d: GET %s: %w", cl, key, err)
				default:
					if op.Value, err = strconv.ParseUint(v, 10, 64); err != nil {
						r.Close()
						return mine, fmt.Errorf("client %d: GET %s returned %q, which no client wrote", cl, key, v)
					}
				}
			}
			op.Return = time.Now().UnixNano()
			mine = append(mine, op)
		}
		r.Close()
	}
	return mine, nil
}
