-- run_now.lua: an operator makes a scheduled job due at once. A job already
-- due (in the due index at or before now: a run-now sent twice, or one made
-- due since it was seen) is refused and nothing is written, so the action
-- is recorded once.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 job id   3 actor ('operator:<name>')   4 note
--      5 the state the operator saw the job in ('' for unchecked)
--      6 the token it saw the job hold ('' for any): the job must still hold
--        it (no attempt claimed since; missing reads as 0)
--      7 the run count it saw ('' for any): the job must still have it (no
--        operator re-ran it since; missing reads as 0)
-- A job held back by flow control (flow.lua) is left as it is: parked on its
-- limit it starts when a permit frees, deferred by its rate at the earliest
-- start the rate allows, and a claim made earlier would only hold it back
-- again (a deferral behind every later one).
-- Reply: {1, 'pending'}; {0, state} when the job is not a pending native job
--        ('missing' when there is no such job, 'bridged' for one its own
--        queue delivers, 'due' for one already due); {-1, 'limit' or 'rate'} when it is held back;
--        {-2, state, token, runs} when the job is no longer in the state of
--        ARGV 5, holds another token than ARGV 6 or is on another run than
--        ARGV 7 (nothing written).
local id = ARGV[2]
local k = jobkey(id)
local h = redis.call('HMGET', k, 'state', 'bridge', 'group', 'run_at', 'wait', 'token', 'runs')
if not h[1] then return {0, 'missing'} end
if (ARGV[5] and ARGV[5] ~= '' and h[1] ~= ARGV[5]) or (ARGV[6] and ARGV[6] ~= '' and u64_norm(h[6]) ~= u64_norm(ARGV[6]))
  or (ARGV[7] and ARGV[7] ~= '' and cnt(h[7]) ~= cnt(ARGV[7])) then
  return {-2, h[1], u64_norm(h[6]), fmt(cnt(h[7]))}
end
if h[1] ~= 'pending' then return {0, h[1]} end
if h[2] then return {0, 'bridged'} end
if h[5] == 'limit' then return {-1, 'limit'} end
local cur = redis.call('ZSCORE', index['pending'], id)
if h[5] == 'rate' and cur and num(cur) > now then return {-1, 'rate'} end
-- (a grouped job waiting for its group's turn is in its group's index, not
-- the due index: run-now takes it out of its turn)
if cur and num(cur) <= now then return {0, 'due'} end
queue_guard()
seq_bump()
-- due now, never later than it already was: a grouped job due since its
-- run_at keeps its place ahead of the jobs that became due after it
local due = now
cur = cur or h[4]
if cur and num(cur) < due then due = num(cur) end
redis.call('HSET', k, 'run_at', fmt(due))
redis.call('ZADD', index['pending'], fmt(due), id)
if h[3] then group_unpark(id, h[3]) end -- out of its group's turn (group.lua)
record(id, {event = 'run_now', actor = ARGV[3], note = ARGV[4]})
event({type = 'run_now', job = id, actor = ARGV[3], note = ARGV[4]})
wake()
return {1, 'pending'}
