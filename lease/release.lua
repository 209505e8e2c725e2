-- release.lua: free a lease, only when the caller still holds its token.
-- KEYS[1] holder hash <ns>:lease:{<resource>}:holder
-- ARGV[1] owner
-- ARGV[2] token
-- Reply: 1 when released, 0 when the caller no longer held it (nothing changed).
-- The token counter is never touched: the next acquire still mints a higher token.
local h = redis.call('HMGET', KEYS[1], 'owner', 'token')
if h[1] == ARGV[1] and h[2] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
