-- linger.lua: the expiry of a lease key that holds no live lease. Prepended to the scripts
-- that release (ops.lua, release.lua) and raise (raise.lua).
-- A key gone is a counter at 0: the next acquire mints the floor, (epoch << 52) + the
-- namespace's time in µs. That time never goes back while the clock record survives, and
-- is never more than internal/epoch's CATCH_UP_MAX_US (60 s) behind the Redis TIME of the
-- node it is read on, whose clock also decides when the key is gone. So a key that expires
-- LINGER_MS (2 min) past the time part of its token, a Redis time in ms, is gone only when
-- every token minted afresh in that epoch or a later one is above every token it held
-- (tokens only rise in a key; the 60 s to spare also cover rounding the token to a double).
local LINGER_MS = 120000
local EPOCH_UNIT_US = 4503599627370496 -- 2^52

-- linger sets that expiry on key, which holds tok (a decimal string) and no live lease. ep
-- is the fencing epoch of the caller, which the namespace's epoch has reached, as a decimal
-- string; '' when nothing keeps the time (epochs off without a clock record, Redis Cluster,
-- whose epochs the slot's master decides): the key then never expires. Neither does a key
-- holding a token of a later epoch than ep (a mark storage fed back), which a fresh token
-- of ep's epoch would be below.
local function linger(key, tok, ep)
  local e = tonumber(ep)
  if not e then return end
  local rel = tonumber(tok) - e * EPOCH_UNIT_US
  if rel >= EPOCH_UNIT_US then return end
  redis.call('PEXPIREAT', key, string.format('%d', math.max(1, math.floor(rel / 1000) + LINGER_MS)))
end
