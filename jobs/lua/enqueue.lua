-- enqueue.lua: create a pending job unless its operation id is already known.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 job id   3 kind   4 operation id ('' = the job id: no operation key is written)
--      5 resource ('' = the job)   6 payload (JSON)
--      7 args for display (JSON with sensitive fields redacted; '' = the payload,
--        stored as '=')
--      8 max retries   9 timeout ms (0 = pool default)   10 run at ms (0 = now)
-- Reply: {1, job id, first} when created (first = 1 when the queue's counters
--        were empty: the caller (re-)registers the queue);
--        {0, existing job id, 0} when deduplicated (nothing written).
local id, op = ARGV[2], ARGV[4]
if op ~= '' then
  local existing = redis.call('GET', opkey(op))
  if existing then
    count('deduplicated_enqueue')
    event({type = 'deduplicated', stage = 'enqueue', job = existing, op = op})
    return {0, existing, 0}
  end
  redis.call('SET', opkey(op), id)
end
local run_at = num(ARGV[10])
if run_at <= 0 then run_at = now end
local f = {'state', 'pending', 'kind', ARGV[3], 'payload', ARGV[6], 'max_retries', ARGV[8],
  'token', '0', 'attempts', '0', 'created', fmt(now)}
local function opt(name, v) if v ~= '' and v ~= '0' then f[#f + 1] = name; f[#f + 1] = v end end
opt('op', op)
opt('resource', ARGV[5])
if ARGV[7] == '' then opt('args', '=') else opt('args', ARGV[7]) end
opt('timeout_ms', ARGV[9])
if run_at ~= now then opt('run_at', fmt(run_at)) end
redis.call('HSET', jobkey(id), unpack(f))
move(id, nil, 'pending', run_at)
wake()
local first = 0
if count('enqueued') == 1 then first = 1 end
return {1, id, first}
