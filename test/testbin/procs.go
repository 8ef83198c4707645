package testbin

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is one process as /proc shows it.
type Process struct {
	PID, PPID int
	// PGID is the process group the process belongs to.
	PGID int
	// State is the one-letter state ("R", "S", "Z" for a zombie, ...).
	State string
	// Command is the command line, arguments separated by spaces.
	Command string
}

// Processes lists the processes of this machine from /proc. Processes
// that exit while it reads are left out.
func Processes() []Process {
	entries, _ := os.ReadDir("/proc")
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the parenthesised command: state, ppid, pgrp, ...
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		pgid, _ := strconv.Atoi(fields[2])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmd = bytes.ReplaceAll(bytes.TrimRight(cmd, "\x00"), []byte{0}, []byte{' '})
		out = append(out, Process{PID: pid, PPID: ppid, PGID: pgid, State: fields[0], Command: string(cmd)})
	}
	return out
}

// Descendants returns the processes below pid, children first.
func Descendants(pid int) []Process {
	children := map[int][]Process{}
	for _, p := range Processes() {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []Process
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.PID)
		}
	}
	return out
}

// Group returns the live processes of process group pgid. Zombies are
// left out: they have exited and only wait for a reaper, which in a
// container may never come.
func Group(pgid int) []Process {
	var out []Process
	for _, p := range Processes() {
		if p.PGID == pgid && p.State != "Z" {
			out = append(out, p)
		}
	}
	return out
}
