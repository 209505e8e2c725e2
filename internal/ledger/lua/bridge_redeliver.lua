-- bridge_redeliver.lua: record that a bridged job is delivered again under a
-- new task of its own queue, because the task that delivered it last is gone
-- or finished there (a Redis failover rewound that queue's record, or it
-- gave up retrying) while the job is not finished. Only the caller that saw
-- the job in this state and token records it: concurrent callers do not
-- both deliver it.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 job id   3 the state the caller saw (pending, running, uncertain)
--      4 the token the caller saw ('' for none)   5 the task the caller saw
--      recorded ('bridge_task')   6 the new task's queue   7 the new task
--      id's stem (the id is stem .. '~' .. n, n counting the job's
--      redeliveries)
-- Reply: {1, task id}   recorded: the caller enqueues that task
--        {0, state}     not recorded: the job changed (its state, token or
--                       recorded task: another caller redelivered it), is
--                       gone ('missing'), is not bridged, or runs under a
--                       live lease
local id = ARGV[2]
local k = jobkey(id)
local h = redis.call('HMGET', k, 'state', 'token', 'bridge', 'deadline', 'bridge_task')
local state = h[1]
if not state then return {0, 'missing'} end
if not h[3] or state ~= ARGV[3] or (h[2] or '') ~= ARGV[4] or (h[5] or '') ~= ARGV[5] then return {0, state} end
if state ~= 'pending' and state ~= 'running' and state ~= 'uncertain' then return {0, state} end
if state == 'running' and num(h[4]) > now then return {0, state} end
queue_guard()
seq_bump()
local n = cnt_incr(k, 'redeliveries')
local task = ARGV[7] .. '~' .. fmt(n)
redis.call('HSET', k, 'bridge_queue', ARGV[6], 'bridge_task', task)
record(id, {event = 'redelivered', from = state,
  note = 'its last task is gone from ' .. h[3] .. ' or finished there: delivered again as task ' .. task})
event({type = 'redelivered', job = id, note = 'task ' .. task})
count('redelivered')
return {1, task}
