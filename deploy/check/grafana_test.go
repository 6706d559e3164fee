package check

// dashboardFile is the Grafana dashboard for docs/metrics.md (relative to the repository root).
const dashboardFile = "deploy/grafana/mm2go.json"
