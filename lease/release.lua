-- release.lua: free a lease, only when the caller still holds its token (one release
-- that runs on its own; ops.lua releases too, in calls merged with others). Prepended with
-- linger.lua.
-- KEYS[1] lease key <ns>:lease:{<resource>} = "<token> <deadline_us> <owner>"
-- ARGV[1] owner
-- ARGV[2] token
-- ARGV[3] the caller's fencing epoch, '' when the key is to stay (see linger)
-- Reply: 1 when released, 0 when the caller no longer held it (nothing changed).
-- The token stays in the key (deadline 0, no owner) until the key lingers out (linger.lua):
-- the next acquire mints a higher one.
local v = redis.call('GET', KEYS[1])
if v then
  local htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$')
  if htok == ARGV[2] and howner == ARGV[1] then
    redis.call('SET', KEYS[1], htok .. ' 0 ')
    linger(KEYS[1], htok, ARGV[3])
    return 1
  end
end
return 0
