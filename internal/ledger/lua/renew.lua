-- renew.lua: extend a batch of running attempts' lease deadlines, each only
-- for its own token.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 lease ttl ms, then 2 values per attempt: id, token
-- Reply: 2 values per attempt:
--   1, deadline ms          renewed
--   2, deadline ms          renewed, and an operator asked to cancel the job
--   0, state ('missing', 'corrupt': shown_state in prelude.lua)
--                           the token no longer runs the job: the lease is lost
local deadline = fmt(now + num(ARGV[2]))
local reply = {}
for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local k = jobkey(id)
  local h = jobread(k, 'state', 'token', 'cancel')
  if h[1] ~= 'running' or h[2] ~= token then
    count('fenced_renew')
    event({type = 'fenced', stage = 'renew', job = id, token = token, current = shown_token(h[2])})
    reply[#reply + 1], reply[#reply + 2] = 0, shown_state(h[1])
  else
    redis.call('HSET', k, 'deadline', deadline)
    redis.call('ZADD', index['running'], deadline, id)
    if h[3] then reply[#reply + 1] = 2 else reply[#reply + 1] = 1 end
    reply[#reply + 1] = deadline
  end
end
return reply
