package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
)

// drainProduct delivers the n pending records of a copy of the backlog to
// a copy of the control plane with agent.Replay, the product's delivery
// path (the daemon's sender, driven by hand), and returns how long it took.
func drainProduct(fx *fixture, n int) (time.Duration, error) {
	dir, err := os.MkdirTemp(fx.base, "drain-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	backlog, err := fx.backlog(n)
	if err != nil {
		return 0, err
	}
	layout := datadir.Layout{Dir: filepath.Join(dir, "agent")}
	if err := copyTree(fx.agentTmpl, layout.Dir); err != nil {
		return 0, err
	}
	if err := copyTree(backlog, layout.Outbox()); err != nil {
		return 0, err
	}
	srv, err := fx.copyServer(dir)
	if err != nil {
		return 0, err
	}
	defer srv.stop()
	start := time.Now()
	res, err := agent.Replay(context.Background(), agent.ReplayOptions{ControlPlane: srv.url, Token: fx.token, DataDir: layout.Dir})
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	if res.Sent != n || res.Dead != 0 || res.Pending != 0 {
		return 0, fmt.Errorf("replay of %d records: %d sent, %d dead, %d pending", n, res.Sent, res.Dead, res.Pending)
	}
	return took, nil
}

func (fx *fixture) copyServer(dir string) (*server, error) {
	cp := filepath.Join(dir, "cp")
	if err := copyTree(fx.serverTmpl, cp); err != nil {
		return nil, err
	}
	return startServer(cp, fx.token, 0)
}

// drainRaw POSTs the same events to a copy of the control plane in
// batches of 500, one after the other, with nothing kept on the agent's
// side: what delivery costs without an outbox.
func drainRaw(fx *fixture, events []api.Event) (time.Duration, error) {
	dir, err := os.MkdirTemp(fx.base, "raw-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	srv, err := fx.copyServer(dir)
	if err != nil {
		return 0, err
	}
	defer srv.stop()
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	start := time.Now()
	for i := 0; i < len(events); i += api.MaxEventsPerBatch {
		batch := events[i:min(i+api.MaxEventsPerBatch, len(events))]
		body, err := json.Marshal(api.EventsRequest{AgentID: fx.agentID, Events: batch})
		if err != nil {
			return 0, err
		}
		req, err := http.NewRequest(http.MethodPost, srv.url+"/v1/events", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+fx.agentToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		var out api.EventsResponse
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("POST /v1/events: %s (%v)", resp.Status, err)
		}
		for _, r := range out.Results {
			if r.Status != api.StatusAccepted {
				return 0, fmt.Errorf("event %s: %s %s", r.Key, r.Status, r.Reason)
			}
		}
		if len(out.Results) != len(batch) {
			return 0, fmt.Errorf("%d results for %d events", len(out.Results), len(batch))
		}
	}
	return time.Since(start), nil
}

// drainRawBacklog runs the raw POST loop over the events of a backlog of n.
func drainRawBacklog(fx *fixture, n int) (time.Duration, error) {
	backlog, err := fx.backlog(n)
	if err != nil {
		return 0, err
	}
	events, err := fx.events(backlog)
	if err != nil {
		return 0, err
	}
	return drainRaw(fx, events)
}

// drainResult is the drain section's figures.
type drainResult struct {
	Records        int       `json:"records"`
	ProductPerSec  float64   `json:"product_records_per_s"` // median
	RawPerSec      float64   `json:"raw_records_per_s"`     // median
	Ratios         []float64 `json:"ratios"`                // product over raw, per round
	Ratio          float64   `json:"ratio"`
	Backlogs       []int     `json:"backlogs"`
	PerRecordUS    []float64 `json:"per_record_us"` // median per backlog
	GrowthRatio    float64   `json:"growth_ratio"`  // largest backlog's per-record cost over the smallest's
	GrowthRoundsOf []int     `json:"growth_rounds"` // rounds measured per backlog
	// The raw POST loop at each backlog, in the same rounds: how much of
	// the growth is the control plane's own (its key set, its files).
	RawPerRecordUS []float64 `json:"raw_per_record_us,omitempty"`
	RawGrowthRatio float64   `json:"raw_growth_ratio,omitempty"`
}

func drainSection(cfg config, fx *fixture, log *log.Logger) (*drainResult, error) {
	n := cfg.drainCompare
	backlog, err := fx.backlog(n)
	if err != nil {
		return nil, err
	}
	events, err := fx.events(backlog)
	if err != nil {
		return nil, err
	}
	if len(events) != n {
		return nil, fmt.Errorf("backlog of %d has %d pending", n, len(events))
	}
	res := &drainResult{Records: n, Backlogs: cfg.backlogs}
	var prod, raw []float64
	per := make([][]float64, len(cfg.backlogs))
	rawPer := make([][]float64, len(cfg.backlogs))
	for round := range cfg.rounds {
		var p, r time.Duration
		for k := range 2 {
			if (k+round)%2 == 0 {
				p, err = drainProduct(fx, n)
			} else {
				r, err = drainRaw(fx, events)
			}
			if err != nil {
				return nil, err
			}
		}
		log.Printf("round %d, drain %s: product %v, raw POST loop %v", round+1, count(n), p.Round(time.Millisecond), r.Round(time.Millisecond))
		prod = append(prod, float64(n)/p.Seconds())
		raw = append(raw, float64(n)/r.Seconds())
		res.Ratios = append(res.Ratios, r.Seconds()/p.Seconds())
		for i, b := range cfg.backlogs {
			if round >= cfg.growthRounds && i == len(cfg.backlogs)-1 {
				continue // the largest backlog is drained in the first growthRounds rounds only
			}
			t := p
			if b != n {
				if t, err = drainProduct(fx, b); err != nil {
					return nil, err
				}
			}
			rt := r
			if b != n {
				if rt, err = drainRawBacklog(fx, b); err != nil {
					return nil, err
				}
			}
			log.Printf("round %d, drain backlog %s: %v, %.1f µs/record; raw POST loop %v, %.1f µs/record", round+1, count(b),
				t.Round(time.Millisecond), us(t)/float64(b), rt.Round(time.Millisecond), us(rt)/float64(b))
			per[i] = append(per[i], us(t)/float64(b))
			rawPer[i] = append(rawPer[i], us(rt)/float64(b))
		}
	}
	res.ProductPerSec, res.RawPerSec, res.Ratio = median(prod), median(raw), median(res.Ratios)
	for i := range cfg.backlogs {
		res.PerRecordUS = append(res.PerRecordUS, median(per[i]))
		res.RawPerRecordUS = append(res.RawPerRecordUS, median(rawPer[i]))
		res.GrowthRoundsOf = append(res.GrowthRoundsOf, len(per[i]))
	}
	if k := len(res.PerRecordUS); k > 1 && res.PerRecordUS[0] > 0 && res.RawPerRecordUS[0] > 0 {
		res.GrowthRatio = res.PerRecordUS[k-1] / res.PerRecordUS[0]
		res.RawGrowthRatio = res.RawPerRecordUS[k-1] / res.RawPerRecordUS[0]
	}
	return res, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
