-- claim.lua: start an attempt on a pending job with a fencing token.
-- KEYS: the ledger layout (see prelude.lua).
-- ARGV 1 job id   2 owner   3 lease ttl ms
--      4 token from the resource lease ('' = the job is its own resource: mint
--        max(stored + 1, Redis TIME in µs) here)
--      5 asynq task id of this delivery
-- Reply: {1, token, deadline ms, attempt, payload, kind, op, timeout ms, max retries}
--        {0, state, token} when not claimable (state 'missing' if no such job);
--        a delivery of a succeeded or dead job is recorded as deduplicated.
local id = ARGV[1]
local h = redis.call('HMGET', jobk, 'state', 'token', 'attempts', 'payload', 'kind', 'op', 'timeout_ms', 'max_retries')
local state = h[1]
if not state then return {0, 'missing', '0'} end
if state ~= 'pending' then
  if state == 'succeeded' or state == 'dead' then
    count('deduplicated_execute')
    event({type = 'deduplicated', stage = 'execute', job = id, task = ARGV[5]})
    record({event = 'deduplicated', stage = 'execute', task = ARGV[5]})
  end
  return {0, state, h[2]}
end
local stored = tonumber(h[2])
local tok
if ARGV[4] == '' then
  tok = stored + 1
  if now_us > tok then tok = now_us end
else
  tok = tonumber(ARGV[4])
  if tok <= stored then
    count('fenced_claim')
    return {0, 'stale', h[2]}
  end
end
local stok = fmt(tok)
local deadline = now + tonumber(ARGV[3])
local attempt = tonumber(h[3]) + 1
redis.call('HSET', jobk, 'state', 'running', 'updated', fmt(now), 'token', stok, 'owner', ARGV[2],
  'deadline', fmt(deadline), 'attempts', fmt(attempt), 'started', fmt(now), 'reason', '')
move(id, 'pending', 'running', deadline)
record({event = 'attempt', attempt = attempt, token = stok, owner = ARGV[2], task = ARGV[5]})
count('attempted')
return {1, stok, fmt(deadline), attempt, h[4], h[5], h[6], h[7], h[8]}
