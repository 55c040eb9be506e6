package sqlstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/postgres"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
)

// TestPostgresListEndsPlan: on PostgreSQL a list reads each day partition
// at most once, the versions of its page's ended Events included, whatever
// the page holds: never a count per row, which probes every partition once
// per record (pages that hold some Events whole and cut others apart).
func TestPostgresListEndsPlan(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 20 Events of 3 versions on 3 days, each ended.
	var batch history.Batch
	for e := 0; e < 20; e++ {
		uid := fmt.Sprint("e", e)
		for n := 0; n < 3; n++ {
			rev := int64(10*e + n + 1)
			v := storetest.Version(uid, rev, fmt.Sprint("p", e%4), n*24*60+e)
			batch.Versions = append(batch.Versions, v)
		}
		batch.Deletions = append(batch.Deletions, history.Deletion{UID: uid, Revision: int64(10*e + 9), At: storetest.Base.Add(72 * time.Hour)})
	}
	if err := s.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	loops := regexp.MustCompile(`loops=(\d+)`)
	for name, q := range map[string]history.Query{
		"all":                   {},
		"pages cutting Events":  {Limit: 7},
		"one object, cut":       {Conditions: []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID}, Value: "p1"}}, Limit: 4},
		"a window cutting them": {Since: storetest.Base.Add(24 * time.Hour), Limit: 500},
	} {
		t.Run(name, func(t *testing.T) {
			query, args, err := s.Store.ListQuery(q)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := s.Store.PostgresPlan(ctx, query, args)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(plan, "\n") {
				if m := loops.FindStringSubmatch(line); strings.Contains(line, " on event_versions_") && m != nil && m[1] != "1" {
					t.Errorf("a partition read %s times: %s\n%s", m[1], line, plan)
				}
			}
		})
	}
}
