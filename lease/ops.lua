-- ops.lua: acquire and release leases, one or more (the calls of several callers merged
-- into one script call, see internal/scriptbatch's Merge). Prepended with internal/epoch's
-- lib.lua (epoch_now, epoch_check, token_mint) and linger.lua.
-- KEYS[i] (i = 1..n) the lease key <ns>:lease:{<resource>} of operation i =
--         "<token> <deadline_us> <owner>"; it keeps the last token minted after the lease
--         ends, until it lingers out (linger.lua)
-- KEYS[n + 1] the namespace's epoch record <ns>:epoch; on Redis Cluster the resource's own
--         <ns>:lease:{<resource>}:clock (n is then 1); absent when epochs are off
-- ARGV[1] replication id of the primary the caller's epoch is for ('' when epochs are off,
--         '@node' on Redis Cluster: this master decides, see lib.lua's epoch_node)
-- ARGV[2] the caller's epoch
-- ARGV[3] the birth of the epoch record it was learned from (internal/epoch)
-- then three per operation i: ARGV[3i + 1], ARGV[3i + 2], ARGV[3i + 3] =
--   'a', owner, ttl in milliseconds: acquire
--   'r', owner, token: release (only when the caller still holds its token)
-- Reply: one value per operation, in order:
--   acquire: '<token> <deadline_us>' when acquired,
--            {0, holder_owner, holder_token, holder_deadline_us} when held by a live lease,
--            {-1, replication id, recorded epoch} when the caller must refresh its epoch
--            (nothing written),
--            {-2, error} when no token is left to mint (nothing written);
--   release: 1 when released, 0 when the caller no longer held it (nothing changed). The
--            token stays in the key (deadline 0, no owner) until the key lingers out (with
--            the epoch record: merged calls run on a single primary): the next acquire
--            mints a higher one.
-- Token = max(last + 1, (epoch << 52) + Redis TIME in µs): every token minted after a
-- failover is above every token minted before it, whatever this node's clock says.
-- Deadlines are in the namespace's time (epoch_now: Redis TIME plus the primary tenure's
-- offset, kept in the epoch record), so a deadline an earlier primary wrote is read on
-- the clock it was written with. The time is read once per script call, when it acquires,
-- and the epoch checked once, when it mints.
local n = (#ARGV - 3) / 3
local rkey = KEYS[n + 1] -- nil: epochs off
local now, rec, rborn, checked, ep, stale
local dls = {}
local out = {}
for i = 1, n do
  local key, op, owner, x = KEYS[i], ARGV[3 * i + 1], ARGV[3 * i + 2], ARGV[3 * i + 3]
  local v = redis.call('GET', key)
  local htok, hdl, howner
  if v then htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$') end
  if op == 'r' then
    if htok and htok == x and howner == owner then
      redis.call('SET', key, htok .. ' 0 ')
      if rkey and ARGV[1] ~= '@node' then linger(key, htok, ARGV[2]) end
      out[i] = 1
    else
      out[i] = 0
    end
  else
    if not now then
      now, rec, rborn = epoch_now(rkey, ARGV[1]) -- the epoch recorded for ARGV[1] and the record's birth, read with the time
    end
    if hdl and tonumber(hdl) > now then
      out[i] = {0, howner, htok, hdl}
    else
      if not checked then
        ep, stale = epoch_check(rkey, ARGV[1], ARGV[2], ARGV[3], rec, rborn)
        checked = true
      end
      local ok, stok
      if ep then ok, stok = pcall(token_mint, htok, ep, now) end
      if not ep then
        out[i] = {-1, stale[1], stale[2]}
      elseif not ok then
        out[i] = {-2, type(stok) == 'table' and stok.err or tostring(stok)}
      else
        local sdl = dls[x] -- the deadline of a ttl, formatted once per call
        if not sdl then
          sdl = string.format('%d', now + tonumber(x) * 1000)
          dls[x] = sdl
        end
        local val = stok .. ' ' .. sdl
        redis.call('SET', key, val .. ' ' .. owner)
        out[i] = val
      end
    end
  end
end
return out
