-- renew.lua: extend a running attempt's deadline, only for its own token.
-- KEYS: the ledger layout (see prelude.lua).
-- ARGV 1 job id   2 token   3 lease ttl ms
-- Reply: {1, deadline ms}; {0, state, token} when the token no longer runs the job.
local h = redis.call('HMGET', jobk, 'state', 'token')
if h[1] ~= 'running' or h[2] ~= ARGV[2] then
  count('fenced_renew')
  event({type = 'fenced', stage = 'renew', job = ARGV[1], token = ARGV[2]})
  return {0, h[1] or 'missing', h[2] or '0'}
end
local deadline = now + tonumber(ARGV[3])
redis.call('HSET', jobk, 'deadline', fmt(deadline))
redis.call('ZADD', index['running'], fmt(deadline), ARGV[1])
return {1, fmt(deadline)}
