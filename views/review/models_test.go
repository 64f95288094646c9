package review

import (
	"strconv"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestQueueCount_ShowsMoreThanTheCapAsAPlus(t *testing.T) {
	for n, want := range map[int]string{
		0:                          "0",
		42:                         "42",
		arbiter.QueueCountCap:      strconv.Itoa(arbiter.QueueCountCap),
		arbiter.QueueCountCap + 1:  strconv.Itoa(arbiter.QueueCountCap) + "+",
		arbiter.QueueCountCap + 99: strconv.Itoa(arbiter.QueueCountCap) + "+",
	} {
		if got := queueCount(n); got != want {
			t.Errorf("queueCount(%d) = %q, want %q", n, got, want)
		}
	}
}
