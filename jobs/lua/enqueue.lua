-- enqueue.lua: create a pending job unless its operation id is already known.
-- KEYS: the ledger layout (see prelude.lua).
-- ARGV 1 job id   2 kind   3 queue   4 operation id   5 resource ('' = the job)
--      6 payload (JSON)   7 args for display (JSON, sensitive fields redacted)
--      8 max retries   9 timeout ms (0 = pool default)   10 run at ms (0 = now)
--     11 asynq task id
-- Reply: {1, job id} when created; {0, existing job id} when deduplicated.
local existing = redis.call('GET', opk)
if existing then
  count('deduplicated_enqueue')
  event({type = 'deduplicated', stage = 'enqueue', job = existing, op = ARGV[4]})
  return {0, existing}
end
local id = ARGV[1]
local run_at = tonumber(ARGV[10])
if run_at <= 0 then run_at = now end
redis.call('SET', opk, id)
redis.call('HSET', jobk, 'id', id, 'kind', ARGV[2], 'queue', ARGV[3], 'op', ARGV[4],
  'resource', ARGV[5], 'payload', ARGV[6], 'args', ARGV[7], 'max_retries', ARGV[8],
  'timeout_ms', ARGV[9], 'task', ARGV[11], 'token', '0', 'attempts', '0', 'runs', '0',
  'created', fmt(now), 'run_at', fmt(run_at), 'reconcile_tries', '0',
  'state', 'pending', 'updated', fmt(now))
move(id, nil, 'pending', run_at)
record({event = 'enqueued', task = ARGV[11]})
count('enqueued')
return {1, id}
