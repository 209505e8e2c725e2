package redisfence

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fencedq/fencedq/fence"
)

// Op is one mutation that Apply performs atomically with the fence check.
// Build it with Set, Del, HSet, HIncrBy, IncrBy or RPush. Its key must carry
// the fenced resource as its hash tag: put "{<resource>}" in the key (its
// first braces), or use Store.DataKey.
type Op struct {
	cmd  string
	key  string
	args []string
}

// Key returns the key the mutation writes.
func (o Op) Key() string { return o.key }

// String describes the mutation without its values, which may be sensitive.
func (o Op) String() string { return o.cmd + " " + o.key }

// Set sets key to value (SET key value), replacing any value of any type.
func Set(key, value string) Op { return Op{cmd: "SET", key: key, args: []string{value}} }

// Del deletes key (DEL key).
func Del(key string) Op { return Op{cmd: "DEL", key: key} }

// HSet sets fields of the hash at key (HSET key field value ...).
func HSet(key string, fields map[string]string) Op {
	args := make([]string, 0, 2*len(fields))
	for f, v := range fields {
		args = append(args, f, v)
	}
	return Op{cmd: "HSET", key: key, args: args}
}

// HIncrBy adds delta to an integer field of the hash at key (HINCRBY).
func HIncrBy(key, field string, delta int64) Op {
	return Op{cmd: "HINCRBY", key: key, args: []string{field, strconv.FormatInt(delta, 10)}}
}

// IncrBy adds delta to the integer at key (INCRBY).
func IncrBy(key string, delta int64) Op {
	return Op{cmd: "INCRBY", key: key, args: []string{strconv.FormatInt(delta, 10)}}
}

// RPush appends values to the list at key (RPUSH).
func RPush(key string, values ...string) Op {
	return Op{cmd: "RPUSH", key: key, args: values}
}

// validateOps checks every op is well formed, writes a distinct key,
// is tagged by the resource (hashTag; sharing its slot is not enough: a
// fence authorises writes to its own resource, not to another one that
// hashes alike) and is none of fencedq's own keys in namespace ns
// (ownKey), which a mutation could otherwise delete or forge, letting a
// lower token write after a higher one.
func validateOps(resource, ns string, ops []Op) error {
	seen := make(map[string]bool, len(ops))
	for _, o := range ops {
		switch {
		case o.cmd == "":
			return fmt.Errorf("%w: zero Op (build ops with Set, Del, HSet, HIncrBy, IncrBy or RPush)", fence.ErrInvalid)
		case o.key == "":
			return fmt.Errorf("%w: %s with empty key", fence.ErrInvalid, o.cmd)
		case (o.cmd == "HSET" || o.cmd == "RPUSH") && len(o.args) == 0:
			return fmt.Errorf("%w: %s %s without values", fence.ErrInvalid, o.cmd, o.key)
		case ownKey(ns, o.key) != "":
			return fmt.Errorf("%w: key %q is one of fencedq's own keys (%s)", fence.ErrInvalid, o.key, ownKey(ns, o.key))
		case seen[o.key]:
			return fmt.Errorf("%w: key %q written twice in one Apply", fence.ErrInvalid, o.key)
		case hashTag(o.key) != resource:
			return fmt.Errorf("%w: key %q is not tagged by resource %q; put {%s} in the key (its first braces)",
				fence.ErrInvalid, o.key, resource, resource)
		}
		seen[o.key] = true
	}
	return nil
}

// ownKeys are the families of fencedq's keys after "<ns>:": prefixes, and
// whole keys where the entry ends with "$". The store's, the leases' and
// their epoch records (a lease key is always in its resource's slot), the
// queues' (in a resource's slot when the queue is named like it), the
// partition registry's (tagged {<ns>:partitions}) and the namespace's own.
var ownKeys = []string{"fence:", "lease:", "{", "epoch$", "partitions", "queues$", "pools$", "pool:", "reconciler:"}

// ownKey names the family of fencedq's keys in namespace ns that key
// belongs to (ownKeys), "" when it is none.
func ownKey(ns, key string) string {
	rest, ok := strings.CutPrefix(key, ns+":")
	if !ok {
		return ""
	}
	for _, k := range ownKeys {
		if whole, ok := strings.CutSuffix(k, "$"); ok {
			if rest == whole {
				return ns + ":" + whole
			}
		} else if strings.HasPrefix(rest, k) {
			return ns + ":" + k + "*"
		}
	}
	return ""
}

// hashTag returns what Redis hashes of key: its hash tag (the part between
// the first "{" and the next "}", when not empty) or the whole key.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// Slot returns the Redis Cluster hash slot of key: CRC16 of the key's hash
// tag (the part between the first "{" and the next "}", when not empty) or
// of the whole key, modulo 16384.
func Slot(key string) int {
	key = hashTag(key)
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % 16384)
}
