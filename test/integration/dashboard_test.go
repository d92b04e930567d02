package integration

import "testing"

// dashboardQueries are the shipped dashboard's queries by panel.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	return nil
}
