// Command loadgen drives steady HTTP load at one endpoint from its own
// process, so a benchmark measures the server without sharing its
// scheduler. It prints one JSON object: requests, errors, rps and latency
// percentiles in microseconds.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
)

// Result is what loadgen prints.
type Result struct {
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	RPS      float64 `json:"rps"`
	P50us    float64 `json:"p50us"`
	P99us    float64 `json:"p99us"`
	MaxUs    float64 `json:"maxUs"`
	// FirstError is the first failure seen, to tell a broken setup from a
	// slow one.
	FirstError string `json:"firstError,omitempty"`
}

func main() {
	method := flag.String("method", "POST", "HTTP method")
	body := flag.String("body", "", "request body")
	token := flag.String("token", "", "bearer token")
	workers := flag.Int("c", 4, "concurrent workers, each with its own connection")
	duration := flag.Duration("d", 3*time.Second, "how long to send requests")
	warmup := flag.Duration("warmup", 300*time.Millisecond, "time before measuring")
	flag.Parse()
	if flag.NArg() != 1 || *workers < 1 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "usage: loadgen [flags] URL")
		flag.PrintDefaults()
		os.Exit(2)
	}
	res := run(flag.Arg(0), *method, []byte(*body), *token, *workers, *warmup, *duration)
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(url, method string, body []byte, token string, workers int, warmup, duration time.Duration) Result {
	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(duration)

	var mu sync.Mutex
	var latencies []time.Duration
	var errs int
	var firstErr string
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: time.Minute}
			var mine []time.Duration
			var myErrs int
			var myFirst string
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				err := once(client, url, method, body, token)
				took := time.Since(t0)
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					myErrs++
					if myFirst == "" {
						myFirst = err.Error()
					}
					continue
				}
				mine = append(mine, took)
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			errs += myErrs
			if firstErr == "" {
				firstErr = myFirst
			}
			mu.Unlock()
		}()
	}
	wg.Wait()

	slices.Sort(latencies)
	res := Result{Requests: len(latencies), Errors: errs, Seconds: duration.Seconds(), FirstError: firstErr}
	res.RPS = float64(res.Requests) / res.Seconds
	if n := len(latencies); n > 0 {
		res.P50us = micros(latencies[n*50/100])
		res.P99us = micros(latencies[min(n-1, n*99/100)])
		res.MaxUs = micros(latencies[n-1])
	}
	return res
}

func once(client *http.Client, url, method string, body []byte, token string) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return nil
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
