-- acquire.lua: take a free (or expired) lease on one resource and mint its token.
-- KEYS[1] holder string <ns>:lease:{<resource>}:holder = "<token> <deadline_us> <owner>", PX = ttl
-- KEYS[2] token counter <ns>:lease:{<resource>}:token   (never expires)
-- ARGV[1] owner
-- ARGV[2] ttl in milliseconds
-- Reply: {1, owner, token, deadline_us} when acquired,
--        {0, holder_owner, holder_token, holder_deadline_us} when held by a live lease.
-- Token = max(stored + 1, Redis TIME in microseconds), so tokens keep rising
-- even after a restart that lost the counter. Deadlines come from Redis TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('GET', KEYS[1])
if v then
  local htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$')
  if hdl and tonumber(hdl) > now then
    return {0, howner, htok, hdl}
  end
end
local stored = tonumber(redis.call('GET', KEYS[2]) or '0')
local tok = stored + 1
if now > tok then tok = now end
local ttl = tonumber(ARGV[2])
local stok = string.format('%d', tok)
local sdl = string.format('%d', now + ttl * 1000)
redis.call('SET', KEYS[2], stok)
redis.call('SET', KEYS[1], stok .. ' ' .. sdl .. ' ' .. ARGV[1], 'PX', ttl)
return {1, ARGV[1], stok, sdl}
