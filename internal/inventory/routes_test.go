package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestDefaultRouteLinks(t *testing.T) {
	tests := []struct {
		name  string
		route string
		v6    string
		want  []string
	}{
		{
			name: "v4 default on eno1",
			route: "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
				"eno1\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
				"enp65s0f0np0\t00003C0A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n",
			want: []string{"eno1"},
		},
		{
			name:  "v6 default on bond0, lo ignored",
			route: "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n",
			v6: "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 bond0\n" +
				"00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n",
			want: []string{"bond0"},
		},
		{
			name:  "no default route",
			route: "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n",
			want:  []string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "net/route"), []byte(tc.route), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.v6 != "" {
				if err := os.WriteFile(filepath.Join(root, "net/ipv6_route"), []byte(tc.v6), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := DefaultRouteLinks(root)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := DefaultRouteLinks(t.TempDir()); err == nil {
		t.Fatal("want an error when net/route is missing")
	}
}
