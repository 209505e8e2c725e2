package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// runMainEnv makes a test binary behave as the chaos command (TestMain
// checks it), so the chaos run can re-execute itself as a worker both as a
// built binary and from `go test`.
const runMainEnv = "FENCEDQ_CHAOS_RUN_MAIN"

// slot is one worker position. A killed worker is replaced in the same slot
// by a new process (a new generation) that uses the slot's proxy.
type slot struct {
	n     int
	proxy *proxy
	// careless workers ignore their handler's cancellation at the storage.
	careless bool

	mu     sync.Mutex
	gen    int
	id     string
	cmd    *exec.Cmd
	done   chan struct{}
	busy   bool // under a process fault (paused, being killed)
	paused bool
}

// workers starts and signals the worker processes.
type workers struct {
	exe     string
	dir     string // log files
	mode    string
	baseArg []string
	slots   []*slot
	stopped bool
	mu      sync.Mutex
}

// start launches the slot's next generation.
func (w *workers) start(s *slot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.mu.Lock()
	stopped := w.stopped
	w.mu.Unlock()
	if stopped {
		return errors.New("workers are stopping")
	}
	s.gen++
	s.id = fmt.Sprintf("w%d.%d", s.n, s.gen)
	args := append([]string{"worker"}, w.baseArg...)
	args = append(args, "--mode", w.mode, "--id", s.id, "--proxy", s.proxy.Addr)
	if s.careless {
		args = append(args, "--careless")
	}
	cmd := exec.Command(w.exe, args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	logf, err := os.Create(filepath.Join(w.dir, "worker-"+strconv.Itoa(s.n)+"."+strconv.Itoa(s.gen)+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start worker %s: %w", s.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	s.cmd, s.done, s.paused = cmd, done, false
	return nil
}

// signal sends sig to the slot's current process.
func (s *slot) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return errors.New("no process")
	}
	return cmd.Process.Signal(sig)
}

// pause stops the process with SIGSTOP.
func (s *slot) pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
	return nil
}

// resume continues a paused process with SIGCONT.
func (s *slot) resume() {
	_ = s.signal(syscall.SIGCONT)
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
}

// kill ends the process with SIGKILL and waits for it.
func (s *slot) kill() {
	_ = s.signal(syscall.SIGKILL)
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// exited reports whether the current process ended by itself.
func (s *slot) exited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// take marks a free slot busy; it returns false if it already was.
func (s *slot) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy {
		return false
	}
	s.busy = true
	return true
}

// release clears the busy mark set by take.
func (s *slot) release() {
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
}

// stopAll resumes paused workers, asks every worker to shut down (SIGTERM)
// and kills those still running after grace.
func (w *workers) stopAll(grace time.Duration) {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	for _, s := range w.slots {
		s.resume()
		_ = s.signal(syscall.SIGTERM)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	expired := false
	for _, s := range w.slots {
		s.mu.Lock()
		done := s.done
		s.mu.Unlock()
		if done == nil {
			continue
		}
		if !expired {
			select {
			case <-done:
				continue
			case <-timer.C:
				expired = true
			}
		}
		s.kill()
	}
}
