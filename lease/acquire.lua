-- acquire.lua: take a free (or expired) lease on one resource and mint its token.
-- KEYS[1] holder hash   <ns>:lease:{<resource>}:holder  (owner, token, deadline)
-- KEYS[2] token counter <ns>:lease:{<resource>}:token   (never expires)
-- ARGV[1] owner
-- ARGV[2] ttl in milliseconds
-- Reply: {1, owner, token, deadline_us} when acquired,
--        {0, holder_owner, holder_token, holder_deadline_us} when held by a live lease.
-- Token = max(stored + 1, Redis TIME in microseconds), so tokens keep rising
-- even after a restart that lost the counter. Deadlines come from Redis TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'deadline')
if h[1] and tonumber(h[3]) > now then
  return {0, h[1], h[2], h[3]}
end
local stored = tonumber(redis.call('GET', KEYS[2]) or '0')
local tok = stored + 1
if now > tok then tok = now end
local ttl = tonumber(ARGV[2])
local deadline = now + ttl * 1000
local stok = string.format('%d', tok)
local sdl = string.format('%d', deadline)
redis.call('SET', KEYS[2], stok)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', stok, 'deadline', sdl)
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, ARGV[1], stok, sdl}
