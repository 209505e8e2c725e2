package redisserver

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// CCHint tells a reader how to get the C compiler the clock shim needs.
const CCHint = "cc not found in PATH: the clock shim (an LD_PRELOAD library shifting a redis-server's wall clock) is compiled at test time; install a C compiler (Debian/Ubuntu: apt-get install -y gcc)"

// ClockOffsetEnv names the environment variable that tells the clock shim
// which file holds the process's clock offset.
const ClockOffsetEnv = "FENCEDQ_CLOCK_OFFSET_FILE"

// ErrNoClockShim means the server was not started with Options.ClockShim.
var ErrNoClockShim = errors.New("redisserver: server runs without the clock shim")

//go:embed clockshim/clockshim.c
var clockShimSrc []byte

// BuildClockShim compiles the clock shim (clockshim/clockshim.c, embedded) with the
// machine's C compiler into dir and returns the library's path, for
// Options.ClockShim. The shim shifts the wall clock (CLOCK_REALTIME,
// gettimeofday, time) of the process it is preloaded into by an offset read
// from a file the process maps shared, so [Server.SetClockOffset] moves a
// running server's clock (Redis TIME included) while its monotonic clock
// stays true, as with a badly set system clock. The error names the package
// to install when cc is missing.
func BuildClockShim(dir string) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", errors.New(CCHint)
	}
	src := filepath.Join(dir, "clockshim.c")
	if err := os.WriteFile(src, clockShimSrc, 0o644); err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libfencedqclock.so")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src, "-ldl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("redisserver: compile the clock shim: %v: %s", err, out)
	}
	return lib, nil
}

// clockFile is the file the shim reads the server's clock offset from.
func (s *Server) clockFile() string {
	return filepath.Join(s.Dir, "clock-offset-"+strconv.Itoa(s.Port))
}

// clockEnv creates the offset file (zero: the true clock) unless it exists,
// so a restart keeps the offset, and returns the process's extra environment.
func (s *Server) clockEnv() ([]string, error) {
	f := s.clockFile()
	if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(f, make([]byte, 8), 0o644); err != nil {
			return nil, err
		}
	}
	return []string{"LD_PRELOAD=" + s.opts.ClockShim, ClockOffsetEnv + "=" + f}, nil
}

// SetClockOffset shifts the server's wall clock by d (negative: behind) from
// now on, without a restart. It needs Options.ClockShim.
func (s *Server) SetClockOffset(d time.Duration) error {
	if s.opts.ClockShim == "" {
		return ErrNoClockShim
	}
	f, err := os.OpenFile(s.clockFile(), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(d.Nanoseconds()))
	_, err = f.WriteAt(b[:], 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
