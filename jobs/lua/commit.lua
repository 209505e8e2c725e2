-- commit.lua: record an attempt's outcome, only for the token that runs the job.
-- KEYS: the ledger layout (see prelude.lua).
-- ARGV 1 job id   2 token   3 outcome: succeeded | retry | dead | uncertain
--      4 error text ('' if none)   5 retention ms for finished jobs
--      6 retry at ms (for retry)   7 reason (why dead or uncertain)
-- Reply: {1, resulting state}; {0, state, token} when stale (nothing changed
--        but the fenced-rejection count and the job's history).
local id, token, outcome = ARGV[1], ARGV[2], ARGV[3]
local h = redis.call('HMGET', jobk, 'state', 'token', 'attempts', 'max_retries')
if h[1] ~= 'running' or h[2] ~= token then
  count('fenced_commit')
  event({type = 'fenced', stage = 'commit', job = id, token = token, current = h[2] or '0'})
  if h[1] then
    record({event = 'fenced', stage = 'commit', token = token, outcome = outcome, error = ARGV[4]})
  end
  return {0, h[1] or 'missing', h[2] or '0'}
end
local to = outcome
local score = now
if outcome == 'retry' then
  if tonumber(h[3]) > tonumber(h[4]) then
    to = 'dead'
    if ARGV[7] == '' then ARGV[7] = 'retries exhausted' end
  else
    to = 'pending'
    score = tonumber(ARGV[6])
  end
end
move(id, 'running', to, score)
local fields = {'state', to, 'updated', fmt(now), 'error', ARGV[4], 'reason', ARGV[7]}
if to == 'succeeded' or to == 'dead' then
  table.insert(fields, 'finished'); table.insert(fields, fmt(now))
  finish(ARGV[5])
  count(to)
elseif to == 'uncertain' then
  table.insert(fields, 'uncertain_since'); table.insert(fields, fmt(now))
  table.insert(fields, 'reconcile_tries'); table.insert(fields, '0')
  count('uncertain')
else
  count('retried')
end
redis.call('HSET', jobk, unpack(fields))
record({event = 'end', attempt = tonumber(h[3]), token = token, outcome = to, error = ARGV[4], reason = ARGV[7]})
return {1, to}
