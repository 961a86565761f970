module github.com/scalestore-go/scalestore

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/HdrHistogram/hdrhistogram-go v1.1.2
	github.com/anishathalye/porcupine v1.3.1
	github.com/anthdm/hollywood v1.0.5
	github.com/cockroachdb/datadriven v1.0.2
	github.com/pingcap/failpoint v0.0.0-20240528011301-b51a646c7c86
	github.com/pingcap/go-ycsb v1.0.1
	github.com/prometheus/client_golang v1.18.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/tidwall/btree v1.8.2
	github.com/tidwall/redcon v1.6.4
	golang.org/x/sys v0.49.0
	pgregory.net/rapid v1.3.0
)

require (
	github.com/DataDog/gostackparse v0.7.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/magiconair/properties v1.8.0 // indirect
	github.com/mattn/go-runewidth v0.0.9 // indirect
	github.com/matttproud/golang_protobuf_extensions/v2 v2.0.0 // indirect
	github.com/olekukonko/tablewriter v0.0.5 // indirect
	github.com/pingcap/errors v0.11.5-0.20211224045212-9687c2b0f87c // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/prometheus/client_model v0.5.0 // indirect
	github.com/prometheus/common v0.45.0 // indirect
	github.com/prometheus/procfs v0.12.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	google.golang.org/protobuf v1.32.0 // indirect
)
