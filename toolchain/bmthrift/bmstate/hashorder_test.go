package bmstate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Values and orders printed by a program built with g++ 12 (Debian 12's
// libstdc++), the library BMv2 is built with here.
func TestLibstdcxxHash(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"", 6142509188972423790},
		{"a", 4993892634952068459},
		{"ab", 5498234120169091963},
		{"abcdefgh", 8664279048047335611},
		{"abcdefghi", 13036955925923793583},
		{"MyIngress.ipv4_lpm", 1523107278581935103},
		{"tbl_act", 15445645723880800112},
	} {
		if got := LibstdcxxHash(tc.in); got != tc.want {
			t.Errorf("LibstdcxxHash(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

func TestUnorderedMapOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"empty", nil, nil},
		{"one", []string{"x"}, []string{"x"}},
		{"three, one bucket each", []string{"a", "b", "c"}, []string{"c", "b", "a"}},
		{
			"cli_compare's tables",
			[]string{"MyIngress.l2", "MyIngress.acl", "MyIngress.flows", "MyIngress.src_rewrite",
				"MyIngress.type_range", "MyIngress.fixed", "MyIngress.by_dst", "MyIngress.by_src"},
			[]string{"MyIngress.fixed", "MyIngress.src_rewrite", "MyIngress.flows", "MyIngress.type_range",
				"MyIngress.acl", "MyIngress.by_src", "MyIngress.by_dst", "MyIngress.l2"},
		},
		{
			// two rehashes: 13 -> 29 -> 59 buckets
			"thirty, rehashed",
			numbered("t", 30),
			strings.Fields("t30 t13 t10 t7 t16 t11 t8 t12 t9 t5 t6 t4 t2 t15 t1 t27 t14 t17 t3 t26 t28 " +
				"t18 t22 t23 t20 t19 t21 t25 t24 t29"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UnorderedMapOrder(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestUnorderedMapOrderAgainstLibstdcxx compares the simulation with the
// real container on random key sets when a C++ compiler is at hand.
func TestUnorderedMapOrderAgainstLibstdcxx(t *testing.T) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++")
	}
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "order.cc")
	prog := `#include <unordered_map>
#include <string>
#include <iostream>
#include <vector>
int main() {
  std::string line; std::vector<std::string> keys;
  while (std::getline(std::cin, line)) {
    if (line != "--") { keys.push_back(line); continue; }
    std::unordered_map<std::string, int> m;
    for (auto &k : keys) m.emplace(k, 0);
    for (auto &e : m) std::cout << e.first << "\n";
    std::cout << "--\n";
    keys.clear();
  }
}
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "order")
	if out, err := exec.Command(cxx, "-O0", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("g++ failed: %v %s", err, out)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var sets [][]string
	var in bytes.Buffer
	for _, n := range []int{1, 2, 5, 11, 12, 13, 14, 15, 28, 29, 30, 58, 59, 60, 75, 126, 127, 128, 300, 1200} {
		seen := map[string]bool{}
		var keys []string
		for len(keys) < n {
			k := fmt.Sprintf("ctl%d.tbl_%x", r.IntN(5), r.Uint64()%(1<<uint(4+r.IntN(40))))
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		sets = append(sets, keys)
		for _, k := range keys {
			in.WriteString(k + "\n")
		}
		in.WriteString("--\n")
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	groups := strings.Split(strings.TrimSuffix(string(out), "--\n"), "--\n")
	if len(groups) != len(sets) {
		t.Fatalf("%d groups, want %d", len(groups), len(sets))
	}
	for i, keys := range sets {
		want := strings.Fields(groups[i])
		if got := UnorderedMapOrder(keys); !slices.Equal(got, want) {
			t.Errorf("%d keys: order differs from libstdc++'s\ngot  %v\nwant %v", len(keys), got, want)
		}
	}
}
