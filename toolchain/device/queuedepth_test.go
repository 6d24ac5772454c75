package device

import "testing"

// TestQueueSetLimit: set_queue_depth grows a queue's ring keeping its
// packets in order, and shrinking it keeps what is queued.
func TestQueueSetLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ring, head int
		queued     []int64
		limit      int
	}{
		{"grow, wrapped", 3, 2, []int64{1, 2, 3}, 8},
		{"grow, empty", 2, 0, nil, 4},
		{"shrink below the queued", 4, 1, []int64{1, 2, 3}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := queue{ring: make([]queued, tc.ring), head: tc.head, limit: tc.ring}
			for _, ns := range tc.queued {
				q.push(queued{enqNs: ns})
			}
			q.setLimit(tc.limit)
			if q.limit != tc.limit || len(q.ring) < tc.limit || len(q.ring) < q.n {
				t.Fatalf("limit %d ring %d n %d", q.limit, len(q.ring), q.n)
			}
			for _, want := range tc.queued {
				if got := q.pop().enqNs; got != want {
					t.Errorf("popped %d, want %d", got, want)
				}
			}
			if q.n != 0 {
				t.Errorf("%d left", q.n)
			}
		})
	}
}

func TestSetQueueDepthChecks(t *testing.T) {
	d, err := New(Config{CPUPort: 255, PriorityQueues: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		port, prio, n int
		ok            bool
	}{
		{-1, -1, 100, true},
		{255, 2, 10, true},
		{3, -1, 10, true}, // no interface: queues all the same, as BMv2's
		{511, -1, 10, false},
		{255, 4, 10, false},
		{255, 0, -1, false},
	} {
		if err := d.SetQueueDepth(tc.port, tc.prio, tc.n); (err == nil) != tc.ok {
			t.Errorf("SetQueueDepth(%d, %d, %d): %v", tc.port, tc.prio, tc.n, err)
		}
	}
	if n, ok := d.QueueDepth(255, 2); !ok || n != 10 {
		t.Errorf("CPU port priority 2: %d %v, want 10", n, ok)
	}
	if n, _ := d.QueueDepth(255, 1); n != 100 {
		t.Errorf("CPU port priority 1: %d, want 100", n)
	}
}
