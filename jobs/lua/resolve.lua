-- resolve.lua: a reconciler decision or an operator's resolution.
-- KEYS: the ledger layout (see prelude.lua).
-- ARGV 1 job id   2 allowed starting states, comma separated (e.g. 'uncertain,review')
--      3 decision: succeeded | rerun | dead | review | later
--      4 actor ('reconciler' or the operator's name)   5 evidence or note
--      6 reconciler leader token ('' for an operator)   7 retention ms
--      8 next try ms (for later)   9 asynq task id (for rerun)
-- Reply: {1, new state, runs}; {0, state} when the job is not in an allowed
--        state; {-1, state} when the reconciler's token is stale.
local id, decision = ARGV[1], ARGV[3]
local state = redis.call('HGET', jobk, 'state')
if not state then return {0, 'missing'} end
local allowed = false
for s in string.gmatch(ARGV[2], '[^,]+') do
  if s == state then allowed = true end
end
if not allowed then return {0, state} end
if not reconciler_ok(ARGV[6]) then return {-1, state} end
local entry = {event = 'resolve', from = state, decision = decision, actor = ARGV[4], note = ARGV[5]}
local to = decision
if decision == 'later' then
  to = state
  redis.call('HINCRBY', jobk, 'reconcile_tries', 1)
  redis.call('ZADD', index[state], ARGV[8], id)
elseif decision == 'rerun' then
  to = 'pending'
  redis.call('HINCRBY', jobk, 'runs', 1)
  redis.call('HSET', jobk, 'task', ARGV[9], 'reason', '', 'error', '', 'state', 'pending', 'updated', fmt(now))
  redis.call('HDEL', jobk, 'finished')
  redis.call('PERSIST', jobk)
  redis.call('PERSIST', histk)
  redis.call('PERSIST', opk)
  move(id, state, 'pending', now)
  entry['task'] = ARGV[9]
elseif decision == 'succeeded' or decision == 'dead' then
  move(id, state, to, now)
  redis.call('HSET', jobk, 'reason', ARGV[5], 'state', to, 'updated', fmt(now), 'finished', fmt(now))
  finish(ARGV[7])
  count(to)
elseif decision == 'review' then
  move(id, state, 'review', now)
  redis.call('HSET', jobk, 'reason', ARGV[5], 'state', 'review', 'updated', fmt(now))
else
  return redis.error_reply('unknown decision ' .. decision)
end
record(entry)
count('resolved_' .. decision)
return {1, to, redis.call('HGET', jobk, 'runs')}
