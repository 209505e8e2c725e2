-- prelude.lua: shared by every ledger script (prepended at load time, after
-- internal/epoch's lib.lua: u64_norm, u64_cmp, token_mint, epoch_check).
--
-- KEYS (the same layout for every ledger script; a script's own keys follow from KEYS 3):
--  1 pending zset (score: due time ms; this is the queue): it names the queue's hash slot
--  2 the clock record (internal/epoch's epoch_now): the namespace's fencing-epoch record
--    <ns>:epoch, which minting scripts (claim, bridge claim) also pass to epoch_check;
--    on Redis Cluster the queue's own <ns>:{q}:clock (its epochs and time, kept by the
--    slot's master: lib.lua's epoch_node)
-- ARGV 1 the queue's key prefix 'ns:{q}:'. The queue's other keys are derived from it,
-- as the per-job keys (job hash, history list, operation-id key), so they share the
-- queue's hash slot (a batched claim cannot name the jobs it will find in advance; and
-- deriving a key costs a call about 800 Redis instructions less than passing it):
--  running zset (score: lease deadline ms)
--  uncertain zset (score: next reconcile look ms)
--  review, succeeded, dead, cancelled zsets
--    (final and review indexes score by the time the job got there)
--  stats hash (counters, and 'seq': the queue's write sequence, see seq_bump)
--  events list (fenced rejections, deduplications, operator actions, rewinds)
--  reconciler high-water (highest reconciler leader token seen)
--  paused flag (present while the queue is paused; its value says who and why)
--  idle flag (set by a claim that found nothing due: the next enqueue publishes a wake-up)
-- Each script's own arguments start at ARGV 2.
local P = ARGV[1]
-- QUEUE_KEYS holds each queue's keys as queue_keys derived them, by
-- prefix, for at most QUEUE_KEYS_MAX queues (about 1.6 KB of Lua memory
-- each; then it is emptied). It is kept across calls (the function library
-- defines it once per load): deriving the keys and building their table
-- cost a call 5 000-13 000 Redis instructions. A script that runs whole
-- (EVALSHA) makes it anew on each call.
local QUEUE_KEYS_MAX = 2000
local QUEUE_KEYS = {n = 0, by = {}} -- kept across calls
-- queue_keys returns the keys of the queue with prefix p and pending index
-- pending: {index, statsk, eventsk, reconk, pausedk, idlek, the minute
-- the next two are for, its per-minute hash (see per_minute)}. The
-- entries are never written to but for the minute's.
local function queue_keys(p, pending)
  local e = QUEUE_KEYS.by[p]
  if e and e[1].pending == pending then return e end
  if QUEUE_KEYS.n >= QUEUE_KEYS_MAX then QUEUE_KEYS.by, QUEUE_KEYS.n = {}, 0 end
  e = {{pending = pending, running = p .. 'running', uncertain = p .. 'uncertain',
        review = p .. 'review', succeeded = p .. 'succeeded', dead = p .. 'dead',
        cancelled = p .. 'cancelled'},
       p .. 'stats', p .. 'events', p .. 'reconciler', p .. 'paused', p .. 'idle', false, false}
  QUEUE_KEYS.by[p], QUEUE_KEYS.n = e, QUEUE_KEYS.n + 1
  return e
end
local qkeys = queue_keys(P, KEYS[1])
local index = qkeys[1]
local statsk, eventsk, reconk, pausedk, idlek = qkeys[2], qkeys[3], qkeys[4], qkeys[5], qkeys[6]
local HISTORY_CAP, EVENTS_CAP = 200, 1000

-- now_us is the namespace's time (Redis TIME plus the primary tenure's
-- offset, never below the last time written: see epoch_now), so times an
-- earlier primary wrote are read on the clock they were written with.
-- epoch_rec, epoch_born: in a minting script, the epoch recorded for its
-- caller's replication id (EPOCH_RID, set by the script's builder in Go)
-- and the record's birth, read with the clock, for epoch_check's pre and
-- pre_born; nil elsewhere.
local now_us, epoch_rec, epoch_born = epoch_now(KEYS[2], EPOCH_RID)
local now = math.floor(now_us / 1000)

local function fmt(n) return string.format('%d', n) end
local snow = fmt(now) -- now as stored in fields and index scores
-- num reads a numeric field; a missing or corrupt one reads as 0, so one
-- bad record can never abort a script that serves a whole batch.
local function num(s) return tonumber(s) or 0 end
-- cnt reads a count field (attempts, retries, put-backs): a whole number
-- from 0 to 2^31 - 1; a missing, corrupt, negative or fractional one (a
-- record edited by hand) reads as 0, or as the cap, or rounded down.
local function cnt(s)
  local n = tonumber(s)
  if not n or not (n >= 0) then return 0 end -- NaN fails the comparison
  if n >= 2147483647 then return 2147483647 end
  return n - n % 1
end
-- cnt_incr adds one to count field f of job key k, read as cnt reads it,
-- and returns the new count: not HINCRBY, which fails on a count edited
-- by hand into something else than a whole number (after the script's
-- earlier writes, which stay).
local function cnt_incr(k, f)
  local n = math.min(cnt(redis.call('HGET', k, f)) + 1, 2147483647)
  redis.call('HSET', k, f, fmt(n))
  return n
end
local function jobkey(id) return P .. 'job:' .. id end
local function histkey(id) return P .. 'job:' .. id .. ':history' end
local function opkey(op) return P .. 'op:' .. op end
-- jobread is HMGET of job key k's fields, or FOREIGN when k holds another
-- type than a hash (written by hand, or by something else): such a key
-- reads as a record in a state no job has, which the scripts put in review
-- (quarantine), so it never fails a script serving a batch (whose writes
-- before an error would stay: a claim would strand the jobs it had taken
-- off the due index).
local FOREIGN = {'foreign'}
local function jobread(k, ...)
  local h = redis.pcall('HMGET', k, ...)
  if h.err then return FOREIGN end
  return h
end
-- foreign reports whether any of keys ks holds another type than want
-- (written by hand, or by something else). A script serving a batch
-- checks an item's keys with it before the item's first write, and leaves
-- the item out when one is foreign: Redis keeps a script's writes before an
-- error, so failing on a later write would leave the batch half applied.
local function foreign(want, ks)
  for _, k in ipairs(ks) do
    local t = redis.call('TYPE', k)['ok']
    if t ~= 'none' and t ~= want then return true end
  end
  return false
end
-- op_named returns the id naming operation id op in this queue,
-- '=<logical queue>=<op>' (internal/ledger's OpJobID), or nil for an
-- operation id of other characters than letters, digits and ._-, or when
-- that id would exceed 200 bytes.
local logical = nil -- the logical queue's name, read from P on first use
local function op_named(op)
  if op == '' or not string.find(op, '^[%w._-]+$') then return nil end
  logical = logical or string.match(P, '{([^}#]*)[^}]*}:$') or ''
  if #logical + #op + 2 > 200 then return nil end
  return '=' .. logical .. '=' .. op
end
-- op_holder returns the id of the job holding operation id op in this
-- queue, or false: the job op_named names (enqueued without an operation
-- key), or the one an operation key op:<op> names (other operation ids, and
-- jobs enqueued before that layout). An operation key of another type
-- (written by hand) names no job, and the enqueue's SET replaces it: an
-- error here would leave a batch's jobs written before it in no index. A
-- named id whose key holds no hash names no job either (write_new_job then
-- leaves the enqueued job out).
local function op_holder(op)
  local named = op_named(op)
  if named and redis.call('TYPE', jobkey(named))['ok'] == 'hash' then return named end
  local v = redis.pcall('GET', opkey(op))
  if type(v) == 'table' then return false end -- an error reply
  return v
end

-- BRIDGE_WAIT is the due time of a bridged job put back to pending: the
-- last millisecond of year 9999, so it is listed and counted as pending but
-- never due for a native claim.
local BRIDGE_WAIT = 253402300799999

-- move moves the job's id between state indexes; the caller writes the
-- 'state' field in its own HSET. A bridged job (delivered by another queue,
-- see bridge_claim.lua) put back to pending (a retry, a re-run) waits at
-- BRIDGE_WAIT: its queue redelivers it, and native pools never claim it.
local function move(id, from, to, score)
  if from and index[from] then redis.call('ZREM', index[from], id) end
  if to == 'pending' and from and redis.call('HEXISTS', jobkey(id), 'bridge') == 1 then score = BRIDGE_WAIT end
  if index[to] then redis.call('ZADD', index[to], fmt(score), id) end
end

-- call_chunked runs redis.call(cmd, key, args...) in chunks, so a large
-- batch never exceeds Lua's unpack limit.
local function call_chunked(cmd, key, args, step)
  for i = 1, #args, step do
    redis.call(cmd, key, unpack(args, i, math.min(i + step - 1, #args)))
  end
end

-- batch_move is move for a script serving a batch: index changes are
-- collected and applied by flush_moves in one ZREM and one ZADD per index.
local removes, adds = {}, {}
local function batch_move(id, from, to, score)
  if to == 'pending' and from and redis.call('HEXISTS', jobkey(id), 'bridge') == 1 then score = BRIDGE_WAIT end
  if from and index[from] then
    removes[from] = removes[from] or {}
    table.insert(removes[from], id)
  end
  if index[to] then
    adds[to] = adds[to] or {}
    table.insert(adds[to], score == now and snow or fmt(score))
    table.insert(adds[to], id)
  end
end
local function flush_moves()
  for from, ids in pairs(removes) do call_chunked('ZREM', index[from], ids, 1000) end
  for to, args in pairs(adds) do call_chunked('ZADD', index[to], args, 1000) end
end

-- record appends one entry to the job's history. The common path (enqueued,
-- one attempt, succeeded) lives in the job's own fields; the first entry
-- beyond it first writes that path out, so the list is then complete. A
-- history started on a finished job (a late entry: a stale commit, a stray
-- due entry) expires with the job, as finish would have made it.
local function record(id, entry)
  local hk = histkey(id)
  local ttl = nil
  local t = redis.call('TYPE', hk)['ok']
  if t ~= 'none' and t ~= 'list' then return end -- a key no history is (see jobread)
  if t == 'none' then
    local f = jobread(jobkey(id), 'created', 'attempts', 'started', 'token', 'owner', 'fence',
      'state', 'finished')
    if f == FOREIGN then return end
    if f[1] then
      if f[8] then ttl = redis.call('PTTL', jobkey(id)) end
      redis.call('HSET', jobkey(id), 'hist', '1') -- claims and completions read this flag
      redis.call('RPUSH', hk, cjson.encode({event = 'enqueued', at = f[1]}))
      -- cnt, not num: an edited count ('inf') is a number JSON cannot hold
      if cnt(f[2]) > 0 and entry.event ~= 'attempt' then
        redis.call('RPUSH', hk, cjson.encode({event = 'attempt', at = f[3], attempt = cnt(f[2]),
          token = f[4], owner = f[5]}))
        -- a job that already succeeded on the common path (an entry about
        -- it afterwards: a stray due-index entry, a stale commit), with its
        -- resource lease's token if it had one
        if f[7] == 'succeeded' then
          redis.call('RPUSH', hk, cjson.encode({event = 'end', at = f[8], attempt = cnt(f[2]),
            token = f[4], fence = f[6], outcome = 'succeeded'}))
        end
      end
    end
  end
  entry['at'] = snow
  if redis.call('RPUSH', hk, cjson.encode(entry)) > HISTORY_CAP then
    redis.call('LTRIM', hk, -HISTORY_CAP, -1)
  end
  if ttl and ttl > 0 then redis.call('PEXPIRE', hk, ttl) end
end

-- shown_state and shown_token are a record's state and token as a reply or
-- an event may carry them: 'missing' and '0' when absent, 'corrupt' and '0'
-- when the record holds something no job has (edited by hand), never the
-- bad value itself.
local function shown_state(s)
  if not s then return 'missing' end
  if index[s] or s == 'waiting' then return s end
  return 'corrupt'
end
local function shown_token(t)
  local n = u64_norm(t)
  if u64_cmp(n, U64_MAX) > 0 then return '0' end
  return n
end

-- event appends to the queue's event feed shown by the dashboard.
local function event(entry)
  entry['at'] = snow
  if redis.call('LPUSH', eventsk, cjson.encode(entry)) > EVENTS_CAP then
    redis.call('LTRIM', eventsk, 0, EVENTS_CAP - 1)
  end
end

-- quarantine moves job id, whose record holds a state no job has (a record
-- edited by hand or corrupt), from index from to review for an operator;
-- the bad value is neither echoed nor kept. reason, when given, names
-- another corrupt part of the record.
local function quarantine(id, from, reason)
  reason = reason or 'corrupt record: unknown state'
  move(id, from, 'review', now)
  local r = redis.pcall('HSET', jobkey(id), 'state', 'review', 'reason', reason)
  if type(r) == 'table' and r.err then
    -- the job key holds no hash (jobread): nothing is written to it; the
    -- event feed says what became of the job
    event({type = 'review', job = id, note = 'corrupt record: the job key holds no hash'})
    return
  end
  record(id, {event = 'end', outcome = 'review', reason = reason})
end

-- per_minute adds n to counter field of the current minute's hash,
-- P .. 'minute:' .. <the minute's start, ms by Redis's clock>: exact counts
-- per minute for the dashboard's charts, kept by the scripts themselves so
-- every job counts whether or not a maintenance leader is alive. Every
-- counter count and flush_tally add to goes here too: one more HINCRBY per
-- counter and call (per kind of outcome for a batch), and a PEXPIREAT when a
-- counter first appears in a minute, so each minute's hash is gone
-- MINUTE_KEEP_MS after the minute began (ledger.MinuteKeep).
local MINUTE_MS, MINUTE_KEEP_MS = 60000, 25 * 3600000
-- minute_key returns the per-minute hash of minute m, kept with the queue's
-- keys (queue_keys) while m is the minute.
local function minute_key(m)
  if qkeys[7] ~= m then qkeys[7], qkeys[8] = m, P .. 'minute:' .. fmt(m) end
  return qkeys[8]
end
local minute_at = now - now % MINUTE_MS
local minutek = minute_key(minute_at)
-- Counts go to Redis as text: a number argument of redis.call is formatted
-- with %.17g, several times the cost of the command's other arguments.
local function per_minute(field, n, sn)
  if n == 0 then return end
  if redis.call('HINCRBY', minutek, field, sn) == n then
    redis.call('PEXPIREAT', minutek, fmt(minute_at + MINUTE_KEEP_MS))
  end
end

-- queue_guard fails the call, before its first write, when one of the
-- queue-level keys it may write holds another type than the ledger writes
-- there (written by hand, or by something else): Redis keeps a script's
-- writes before an error, so a call failing at such a key after writing
-- would leave partial state. names lists keys of the table below (nil: all
-- of them), extra more {key, type} pairs; one TYPE per key and call. The
-- operator, maintenance and schedule scripts call it; the hot paths
-- (enqueue, claim, completion, renewal, bridge claim) do not: 15 TYPE calls
-- cost a completion call about 12 µs of Redis CPU, and only a key written by
-- hand is ever of another type. The error's text begins with FOREIGNKEY
-- (internal/ledger's ErrForeignKey).
local function queue_guard(names, extra)
  local known = {
    pending = {index.pending, 'zset'}, running = {index.running, 'zset'},
    uncertain = {index.uncertain, 'zset'}, review = {index.review, 'zset'},
    succeeded = {index.succeeded, 'zset'}, dead = {index.dead, 'zset'},
    cancelled = {index.cancelled, 'zset'}, stats = {statsk, 'hash'}, events = {eventsk, 'list'},
    minute = {minutek, 'hash'}, limits = {P .. 'limits', 'hash'}, rates = {P .. 'rates', 'hash'},
    groups = {P .. 'groups', 'hash'}, handover = {P .. 'handover', 'hash'},
    wf_part = {P .. 'wf_part', 'hash'}, waiting = {P .. 'waiting', 'zset'},
    wf_changed = {P .. 'wf_changed', 'set'}}
  local all = {'pending', 'running', 'uncertain', 'review', 'succeeded', 'dead', 'cancelled', 'stats',
    'events', 'minute', 'limits', 'rates', 'groups', 'handover', 'wf_part', 'waiting', 'wf_changed'}
  local ks = {}
  for _, name in ipairs(names or all) do ks[#ks + 1] = known[name] end
  for _, k in ipairs(extra or {}) do ks[#ks + 1] = k end
  for _, k in ipairs(ks) do
    local t = redis.call('TYPE', k[1])['ok']
    if t ~= 'none' and t ~= k[2] then
      error({err = 'FOREIGNKEY the queue key ' .. k[1] .. ' holds another type than a ' .. k[2] ..
        ': nothing was written'})
    end
  end
end

local function count(field, n)
  local sn = n and fmt(n) or '1'
  per_minute(field, n or 1, sn)
  return redis.call('HINCRBY', statsk, field, sn)
end

-- The queue's write sequence, stats field 'seq', rises by one with every
-- call of a script that changes the queue's jobs (seq_bump, once per call).
-- Enqueue, claim and complete return it with 'enqueued' and the sequence's
-- history, 'hist' (seq_reply): the caller remembers the highest values it
-- saw, and a later call that finds them lower found a ledger that went back
-- (a failover to a lagging replica, a restart from older data: see
-- internal/ledger's rewind.go). 'hist' is the namespace's time (µs) when the
-- sequence was created: a ledger that lost the queue's whole record (a
-- restart without persistence, a flushed database) starts a new history,
-- which later writes cannot make look like the old one ('' for a sequence
-- created before the field existed). The stats field 'tenure',
-- '<epoch>:<seq>:<enqueued>', marks where the current primary tenure
-- began: the clock record's highest epoch (epoch_max_seen, raised by every
-- tenure's first minting call) and the sequence and enqueued counter the
-- queue had when the first call of that epoch wrote it. seq_reply returns
-- it after the history, as '<hist>/<tenure>': a caller that saw more than
-- that before the tenure began finds the loss however many writes the new
-- primary made since. (A field of its own: a process of an earlier version
-- compares 'hist' whole.)
local seq_now, seq_hist, seq_ten = nil, nil, nil
local function seq_bump()
  if seq_now then return end
  seq_now = redis.call('HINCRBY', statsk, 'seq', '1')
  local ep = epoch_max_seen
  if seq_now == 1 then
    seq_hist = fmt(now_us)
    if ep then
      seq_ten = ep .. ':0:0'
      redis.call('HSET', statsk, 'hist', seq_hist, 'tenure', seq_ten)
    else
      redis.call('HSET', statsk, 'hist', seq_hist)
    end
    return
  end
  if not ep then return end
  local v = redis.call('HMGET', statsk, 'hist', 'tenure')
  seq_hist, seq_ten = v[1] or '', v[2]
  if not seq_ten or string.match(seq_ten, '^%d+') ~= ep then
    seq_ten = ep .. ':' .. fmt(seq_now - 1) .. ':' .. fmt(num(redis.call('HGET', statsk, 'enqueued')))
    redis.call('HSET', statsk, 'tenure', seq_ten)
  end
end
-- seq_hist_reply is a history as seq_reply returns it: with the tenure,
-- when one is recorded, after a '/'.
local function seq_hist_reply(hist, ten)
  if ten then return (hist or '') .. '/' .. ten end
  return hist or ''
end
-- seq_reply returns {write sequence, 1 when this call raised it (else 0),
-- the queue's enqueued counter, the sequence's history and tenure ('' none)};
-- enqueued, when given, is that counter as this call's own HINCRBY
-- returned it (nothing else changes it meanwhile).
local function seq_reply(enqueued)
  if seq_now then
    if seq_hist then
      return seq_now, 1, enqueued or num(redis.call('HGET', statsk, 'enqueued')), seq_hist_reply(seq_hist, seq_ten)
    end
    local v = redis.call('HMGET', statsk, 'enqueued', 'hist', 'tenure')
    return seq_now, 1, enqueued or num(v[1]), seq_hist_reply(v[2], v[3])
  end
  local v = redis.call('HMGET', statsk, 'seq', 'enqueued', 'hist', 'tenure')
  return num(v[1]), 0, num(v[2]), seq_hist_reply(v[3], v[4])
end

-- finish applies the retention period to a job that reached a final state;
-- hist says whether the job has a history list. The keys expire retention
-- after now: PEXPIREAT of that moment, which Redis runs as it is (a PEXPIRE
-- is rewritten into it for propagation, on every call). The shortest
-- retention applied to the queue is kept in the stats field 'retention'
-- (ms): a client's re-submission after a rewind sends no job older than
-- half of it (a job whose record expired would come back).
local expiry = {} -- retention_ms → the moment as text, formatted once per call
local function finish(id, op, retention_ms, hist)
  local key = retention_ms or ''
  local at = expiry[key]
  if at == nil then
    local r = tonumber(key)
    at = (r and r > 0) and fmt(now + r) or false
    expiry[key] = at
    if at then
      local kept = tonumber(redis.call('HGET', statsk, 'retention') or '')
      if not kept or r < kept then redis.call('HSET', statsk, 'retention', key) end
    end
  end
  if at then
    redis.call('PEXPIREAT', jobkey(id), at)
    if hist then redis.call('PEXPIREAT', histkey(id), at) end
    if op and op ~= '' then redis.call('PEXPIREAT', opkey(op), at) end
  end
end

-- tally counts in memory; flush_tally adds them to the stats hash once per
-- field, so a batch of N outcomes costs one HINCRBY per kind of outcome.
local tally = {}
local function tallied(field) tally[field] = (tally[field] or 0) + 1 end
local function flush_tally()
  for field, n in pairs(tally) do
    local sn = fmt(n)
    redis.call('HINCRBY', statsk, field, sn)
    per_minute(field, n, sn)
  end
end

-- unfinish undoes finish for a job that leaves a final state (a re-run).
local function unfinish(id, op)
  redis.call('PERSIST', jobkey(id))
  redis.call('PERSIST', histkey(id))
  if op and op ~= '' then redis.call('PERSIST', opkey(op)) end
end

-- wake tells idle fetchers (who set the idle flag) that a job became due.
local function wake()
  if redis.call('DEL', idlek) == 1 then redis.call('PUBLISH', P .. 'notify', '1') end
end

-- reconciler_ok fences reconciler writes by the leader's lease token.
-- Lease tokens of fencing epoch 2 and up are above 2^53, where Lua numbers
-- are not exact: they are compared as decimal strings.
local function reconciler_ok(token)
  if token == '' then return true end
  local tok = u64_norm(token)
  local hw = redis.call('GET', reconk)
  if hw and u64_cmp(u64_norm(hw), tok) > 0 then return false end
  redis.call('SET', reconk, tok)
  return true
end

-- u64_max returns the higher of two decimal tokens (normalised; one that
-- is no uint64 reads as '0', as in token_mint).
local function u64_max(a, b)
  a, b = u64_token(a), u64_token(b)
  if u64_cmp(a, b) >= 0 then return a end
  return b
end

-- minter returns the function a script mints job tokens with in fencing
-- epoch ep: mint(last) = token_mint(last, ep, now_us) (internal/epoch's
-- lib.lua), max(last + 1, (ep << 52) + now_us) as a decimal string. A claim
-- mints many: while the floor and last are below EXACT (epochs 0 and 1),
-- where Lua numbers are exact, it computes in numbers.
local function minter(ep)
  local floor = token_mint('0', ep, now_us)
  local nfloor = tonumber(floor)
  if nfloor >= EXACT then
    return function(last) return token_mint(last, ep, now_us) end
  end
  return function(last)
    if not last then return floor end -- never claimed: no token field, reads as 0
    if type(last) == 'string' and #last <= 16 and string.find(last, '^%d+$') then
      local n = tonumber(last) + 1
      if n < EXACT then
        if n > nfloor then return fmt(n) end
        return floor
      end
    end
    return token_mint(last, ep, now_us)
  end
end

-- write_new_job writes a pending job from enqueue's 10 values per job
-- starting at ARGV[i] (see enqueue.lua), plus the fields in extra (a flat
-- list, may be nil or empty), and returns its due time and that time as
-- text (a pending index score); nil when the job's key holds another type
-- than a hash (written by hand): nothing is written, the caller leaves the
-- job out (its first write, so the job is written whole or not at all).
local function write_new_job(i, extra)
  local op, resource, display = ARGV[i + 2], ARGV[i + 3], ARGV[i + 5]
  local run_at, srun_at = now, snow
  local delay = num(ARGV[i + 8])
  if delay ~= 0 then run_at = now + delay; srun_at = fmt(run_at) end -- negative: a RunAt already past
  -- no 'token' nor 'attempts' field until the first claim: missing, they read as 0
  local f = {'state', 'pending', 'kind', ARGV[i + 1], 'payload', ARGV[i + 4], 'max_retries', ARGV[i + 6],
    'created', snow, 'args', display == '' and '=' or display}
  local n = 12
  if extra then
    for _, v in ipairs(extra) do n = n + 1; f[n] = v end
  end
  -- optional fields, written only when set ('' and '0' are unset)
  if op ~= '' and op ~= '0' and ARGV[i] ~= op_named(op) then n = n + 2; f[n - 1] = 'op'; f[n] = op end -- else the id names it
  if resource ~= '' and resource ~= '0' then n = n + 2; f[n - 1] = 'resource'; f[n] = resource end
  local timeout, headers = ARGV[i + 7], ARGV[i + 9]
  if timeout ~= '' and timeout ~= '0' then n = n + 2; f[n - 1] = 'timeout_ms'; f[n] = timeout end
  if headers ~= '' then n = n + 2; f[n - 1] = 'headers'; f[n] = headers end
  if run_at ~= now then n = n + 2; f[n - 1] = 'run_at'; f[n] = srun_at end
  local w = redis.pcall('HSET', jobkey(ARGV[i]), unpack(f, 1, n))
  if type(w) == 'table' and w.err then return nil end
  return run_at, srun_at
end

-- enqueue_reply indexes the created jobs (due: flat score, id pairs), wakes
-- idle pools, counts them and completes an enqueue script's reply.
local function enqueue_reply(reply, created, due)
  local enqueued = nil
  if created > 0 then
    call_chunked('ZADD', KEYS[1], due, 1000) -- the pending index
    wake()
    enqueued = count('enqueued', created)
    if enqueued == created then reply[1] = 1 end
  end
  flush_tally()
  reply[2], reply[3], reply[4], reply[5] = seq_reply(enqueued)
  return reply
end
