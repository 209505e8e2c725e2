-- bridge_claim.lua: a fenced attempt for one delivery of a job that another
-- queue delivers (a bridge: asynq). The record is created on first sight and
-- marked bridged ('bridge' field); it never enters the native due index, so
-- native pools never claim it (a bridged job put back to pending by a retry or
-- a re-run stays out of the due index: see move in prelude.lua). Running, it
-- is indexed in 'running' like any job, so the expirer and the resolver
-- handle it as they handle native jobs.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua); KEYS 2 the epoch record.
-- ARGV 2 job id   3 kind   4 operation id ('' = the job id)   5 payload
--      6 max retries   7 timeout ms (0 = none)   8 owner   9 lease ttl ms
--     10 bridge name (e.g. 'asynq')
--     11 replication id of the primary the caller's epoch is for ('' when epochs are off)
--     12 the caller's epoch
--     13 the delivering queue's own queue name   14 its task id: where the
--        delivery came from, kept in 'bridge_queue' and 'bridge_task' so a
--        job whose task that queue lost can be delivered again
--        (bridge_redeliver.lua)
--     15 the birth of the epoch record the caller's epoch was learned from (internal/epoch)
--     16 the delivering task's headers, encoded as a job's 'headers' field
--        ('' = none): kept on first sight, so that a task replacing a lost
--        one carries them (bridge_redeliver.lua)
-- The token is minted as claim.lua mints it: max(stored + 1, (epoch << 52) +
-- Redis TIME in µs), above a storage mark recorded by raise.lua.
-- Reply: {seq, seq raised, enqueued, history} (the write sequence, as
--        prelude.lua's seq_reply returns it, for the caller's rewind check),
--        then one of:
--        {1, token, deadline ms, attempt, created (1 = first sight)}  claimed
--        {2, state}                    already final: a duplicate delivery
--        {3, owner, deadline ms}       running under a live lease elsewhere
--        {4, state, reconcile tries}   uncertain or review: the reconciler
--                                      decides first (a running attempt whose
--                                      lease deadline passed is made uncertain
--                                      here, as the expirer would)
--        {5, state}                    a native job (or another job owning the
--                                      operation id) has this id: not claimed
--        {6}                           the queue is paused: not claimed (a job
--                                      seen first is recorded pending)
--        {7, replication id, epoch}    the caller must refresh its epoch
--                                      (internal/epoch); nothing was written
--        {8, kind}                     the bridged job of this id is of
--                                      another kind (the one given): not
--                                      this delivery's job; nothing was written
-- answer is the reply: the write sequence, then the status values given.
local function answer(...)
  local seq, raised, enqueued, hist = seq_reply()
  return {seq, raised, enqueued, hist, ...}
end
local id, kind, op, payload = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local owner, ttl, bridge = ARGV[8], num(ARGV[9]), ARGV[10]
local k = jobkey(id)
local h = redis.call('HMGET', k, 'state', 'token', 'attempts', 'bridge', 'deadline', 'owner', 'reconcile_tries', 'mark')
local state = h[1]
local created = 0
if not state and op ~= '' then
  local other = op_holder(op)
  if other and other ~= id then return answer(5, 'operation owned by ' .. other) end
end
if state and not h[4] then return answer(5, state) end
if state then -- (not on a first delivery) a task of another kind naming the job is not its delivery
  local rk = redis.call('HGET', k, 'kind')
  if rk ~= kind then return answer(8, rk or '') end
end
if state == 'succeeded' or state == 'dead' or state == 'cancelled' then
  seq_bump()
  count('deduplicated_execute')
  event({type = 'deduplicated', stage = 'execute', job = id})
  record(id, {event = 'deduplicated', stage = 'execute'})
  return answer(2, state)
end
if state == 'running' then
  if num(h[5]) > now then return answer(3, h[6] or '', num(h[5])) end
  local reason = 'lease expired without commit'
  seq_bump()
  move(id, 'running', 'uncertain', now)
  redis.call('HSET', k, 'state', 'uncertain', 'reason', reason, 'uncertain_since', fmt(now), 'reconcile_tries', '0')
  record(id, {event = 'end', attempt = cnt(h[3]), token = h[2], outcome = 'uncertain', reason = reason})
  count('uncertain')
  return answer(4, 'uncertain', 0)
end
if state == 'uncertain' or state == 'review' then return answer(4, state, num(h[7])) end
if state and state ~= 'pending' then return answer(5, state) end
-- first_sight returns the fields of the job's record created on its first
-- delivery, in state st, and binds its operation id.
local function first_sight(st)
  local f = {'state', st, 'kind', kind, 'payload', payload, 'max_retries', ARGV[6], 'created', fmt(now),
    'bridge', bridge, 'bridge_queue', ARGV[13], 'bridge_task', ARGV[14]}
  if op ~= '' then -- (the job's id, when the task's operation id named it): a native enqueue of it finds the job
    redis.call('SET', opkey(op), id)
    f[#f + 1] = 'op'; f[#f + 1] = op
  end
  if num(ARGV[7]) > 0 then f[#f + 1] = 'timeout_ms'; f[#f + 1] = ARGV[7] end
  if ARGV[16] ~= '' then f[#f + 1] = 'headers'; f[#f + 1] = ARGV[16] end
  return f
end
if redis.call('EXISTS', pausedk) == 1 then
  if not state then
    -- Recorded, pending for its task, though not claimed: should the task's
    -- retries run out while the queue is paused, the job is still there to
    -- be delivered again (bridge_redeliver.lua) once it is resumed.
    seq_bump()
    redis.call('HSET', k, unpack(first_sight('pending')))
    redis.call('ZADD', index['pending'], fmt(BRIDGE_WAIT), id)
    count('enqueued')
  end
  return answer(6)
end
local ep, stale = epoch_check(KEYS[2], ARGV[11], ARGV[12], ARGV[15], epoch_rec, epoch_born)
if not ep then return answer(7, stale[1], stale[2]) end
local last = h[2]
if h[8] then -- storage's mark (raise.lua): mint above it
  last = u64_max(last, h[8])
  redis.call('HDEL', k, 'mark')
end
local stok = token_mint(last, ep, now_us)
seq_bump()
local attempt = cnt(h[3]) + 1
local deadline = fmt(now + ttl)
if not state then
  created = 1
  local f = first_sight('running')
  for _, v in ipairs({'token', stok, 'attempts', '1', 'started', fmt(now), 'owner', owner, 'deadline', deadline}) do
    f[#f + 1] = v
  end
  redis.call('HSET', k, unpack(f))
  count('enqueued')
else
  redis.call('ZREM', index['pending'], id)
  redis.call('HSET', k, 'state', 'running', 'token', stok, 'owner', owner, 'deadline', deadline,
    'attempts', fmt(attempt), 'started', fmt(now), 'bridge_queue', ARGV[13], 'bridge_task', ARGV[14])
  if redis.call('EXISTS', histkey(id)) == 1 then
    record(id, {event = 'attempt', attempt = attempt, token = stok, owner = owner})
  end
end
redis.call('ZADD', index['running'], deadline, id)
count('attempted')
return answer(1, stok, deadline, attempt, created)
