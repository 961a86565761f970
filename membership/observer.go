package membership

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Observer reads a cluster's agreed view without being a member: for
// tools that watch a cluster change views (crashtest --cluster measures
// the time from a kill to the view without the killed node).
type Observer struct {
	cli     *clientv3.Client
	viewKey string
}

// Observe connects to the cluster's etcd.
func Observe(endpoints []string, cluster string) (*Observer, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: DefaultDialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("membership: etcd client for %v: %w", endpoints, err)
	}
	return &Observer{cli: cli, viewKey: "/scalestore/" + cluster + "/view"}, nil
}

// View is the view agreed now; the zero View if none was agreed yet.
func (o *Observer) View(ctx context.Context) (View, error) {
	resp, err := o.cli.Get(ctx, o.viewKey)
	if err != nil {
		return View{}, fmt.Errorf("membership: reading %s: %w", o.viewKey, err)
	}
	if len(resp.Kvs) == 0 {
		return View{}, nil
	}
	return decodeView(resp.Kvs[0].Value)
}

// Close closes the connection.
func (o *Observer) Close() error { return o.cli.Close() }
