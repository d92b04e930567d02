module github.com/servicegroup/servicegroup/hack/grafana-dashboard-check

go 1.26.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
