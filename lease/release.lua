-- release.lua: free a lease, only when the caller still holds its token.
-- KEYS[1] holder string <ns>:lease:{<resource>}:holder = "<token> <deadline_us> <owner>"
-- ARGV[1] owner
-- ARGV[2] token
-- Reply: 1 when released, 0 when the caller no longer held it (nothing changed).
-- The token counter is never touched: the next acquire still mints a higher token.
local v = redis.call('GET', KEYS[1])
if v then
  local htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$')
  if htok == ARGV[2] and howner == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
  end
end
return 0
