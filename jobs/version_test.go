package jobs

import (
	"runtime/debug"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	cases := []struct {
		name, linked string
		bi           *debug.BuildInfo
		want         string
	}{
		{"linked wins", "v9.9.9", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.0.0"}}, "v9.9.9"},
		{"no build info", "", nil, "(devel)"},
		{"application requiring the library", "", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "example.com/other", Version: "v0.1.0"}, {Path: modulePath, Version: "v1.4.2"}},
		}, "v1.4.2"},
		{"replaced by a local copy, then the commit", "", &debug.BuildInfo{
			Main:     debug.Module{Path: modulePath + "/cmd", Version: "(devel)"},
			Deps:     []*debug.Module{{Path: modulePath, Version: "v0.0.0", Replace: &debug.Module{Path: "../"}}},
			Settings: vcs,
		}, "devel+0123456789ab+dirty"},
		{"built in this repository with a stamped version", "", &debug.BuildInfo{
			Main: debug.Module{Path: modulePath, Version: "v0.0.0-20261202031500-0123456789ab"},
		}, "v0.0.0-20261202031500-0123456789ab"},
		{"another main module is not the library's version", "", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/app", Version: "v3.0.0"},
		}, "(devel)"},
	}
	for _, c := range cases {
		if got := buildVersion(c.linked, c.bi, c.bi != nil); got != c.want {
			t.Errorf("%s: buildVersion = %q, want %q", c.name, got, c.want)
		}
	}
	if BuildVersion() == "" || BuildVersion() == "dev" {
		t.Fatalf("BuildVersion() = %q", BuildVersion())
	}
}
