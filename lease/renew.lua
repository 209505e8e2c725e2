-- renew.lua: extend a live lease held by the caller's token.
-- KEYS[1] holder hash <ns>:lease:{<resource>}:holder
-- ARGV[1] owner
-- ARGV[2] token
-- ARGV[3] ttl in milliseconds
-- Reply: {1, deadline_us} when renewed; {0, reason} when lost, reason one of
--        "expired" (no live holder) or "superseded" (another token holds it).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'deadline')
if not h[2] then
  return {0, 'expired'}
end
if h[2] ~= ARGV[2] or h[1] ~= ARGV[1] then
  return {0, 'superseded'}
end
if tonumber(h[3]) <= now then
  return {0, 'expired'}
end
local ttl = tonumber(ARGV[3])
local sdl = string.format('%d', now + ttl * 1000)
redis.call('HSET', KEYS[1], 'deadline', sdl)
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, sdl}
