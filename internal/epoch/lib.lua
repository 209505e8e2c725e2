-- lib.lua (internal/epoch): prepended to every script that mints fencing tokens.
--
-- A token is a uint64: max(last + 1, (epoch << 52) + Redis TIME in µs). Lua
-- numbers are doubles, exact only below 2^53, and tokens of epoch 2 and up
-- are above that, so tokens are decimal strings here (no leading zeros) and
-- their arithmetic works on 7-digit chunks, which stay exact.
local EPOCH_MAX = 4095
local EPOCH_UNIT = '4503599627370496' -- 2^52
local U64_MAX = '18446744073709551615'

-- u64_norm returns s without leading zeros; anything but digits reads as '0'.
local function u64_norm(s)
  if type(s) ~= 'string' then return '0' end
  return string.match(s, '^0*(%d+)$') or '0'
end

-- u64_cmp compares two normalised decimal strings: -1, 0 or 1.
local function u64_cmp(a, b)
  if #a ~= #b then
    if #a < #b then return -1 end
    return 1
  end
  if a == b then return 0 end
  if a < b then return -1 end
  return 1
end

-- u64_token returns token s normalised; anything but a uint64 (garbage, or
-- digits above 2^64 - 1: a record edited by hand) reads as '0'.
local function u64_token(s)
  s = u64_norm(s)
  if u64_cmp(s, U64_MAX) > 0 then return '0' end
  return s
end

-- u64_join formats 7-digit chunks, most significant first.
local function u64_join(chunks)
  local s = ''
  for i, c in ipairs(chunks) do
    if i == 1 then s = string.format('%d', c) else s = s .. string.format('%07d', c) end
  end
  return u64_norm(s)
end

-- u64_add returns a + b (normalised decimal strings).
local function u64_add(a, b)
  local out, carry, i, j = {}, 0, #a, #b
  while i > 0 or j > 0 or carry > 0 do
    local x = carry
    if i > 0 then x = x + tonumber(string.sub(a, math.max(1, i - 6), i)); i = i - 7 end
    if j > 0 then x = x + tonumber(string.sub(b, math.max(1, j - 6), j)); j = j - 7 end
    carry = math.floor(x / 10000000)
    table.insert(out, 1, x - carry * 10000000)
  end
  return u64_join(out)
end

-- u64_mul returns a * k for a small integer k (0 <= k <= EPOCH_MAX).
local function u64_mul(a, k)
  local out, carry, i = {}, 0, #a
  while i > 0 or carry > 0 do
    local x = carry
    if i > 0 then x = x + tonumber(string.sub(a, math.max(1, i - 6), i)) * k; i = i - 7 end
    carry = math.floor(x / 10000000)
    table.insert(out, 1, x - carry * 10000000)
  end
  return u64_join(out)
end

-- EXACT is 2^53 - 1: below it Lua numbers are exact integers.
local EXACT = 9007199254740991

-- token_mint returns the token to mint after last (a decimal string; nil,
-- '' or garbage, a number above 2^64 - 1 included, for none) in epoch ep at Redis time now_us: the higher of
-- last + 1 and (ep << 52) + now_us. Epoch 0 gives max(last + 1, now_us).
-- While both are below EXACT (epochs 0 and 1, and their tokens) it computes
-- in numbers; the decimal strings cost about 8 µs of Redis CPU per call.
local function token_mint(last, ep, now_us)
  local nfloor = ep * 4503599627370496 + now_us -- 2^52
  if nfloor < EXACT then
    local n = 0 -- none or garbage reads as 0, as u64_norm
    if type(last) == 'string' and string.find(last, '^%d+$') then
      n = #last <= 16 and tonumber(last) or EXACT
    end
    if n + 1 < EXACT then return string.format('%d', math.max(n + 1, nfloor)) end
  end
  local floor = u64_add(u64_mul(EPOCH_UNIT, ep), string.format('%d', now_us))
  local tok = u64_add(u64_token(last), '1')
  if u64_cmp(floor, tok) > 0 then tok = floor end
  if u64_cmp(tok, U64_MAX) > 0 then error({err = 'FENCEDQ token space exhausted'}) end
  return tok
end

-- epoch_replid returns the replication id of the node this runs on (its
-- primary's when it is a replica), or '' and why when INFO gives none (the
-- Redis user may not run INFO, or the server has no replication section):
-- epochs are then off, and the caller's tracker says so in its log.
local function epoch_replid()
  local info = redis.pcall('INFO', 'replication')
  if type(info) ~= 'string' then
    return '', type(info) == 'table' and tostring(info.err) or 'no reply'
  end
  -- A writable replica (replica-read-only no) runs the script: its writes
  -- would go when it next syncs with its primary.
  if string.find(info, 'role:slave', 1, true) then
    error({err = 'FENCEDQ this Redis is a replica (replica-read-only no): connect to the primary'})
  end
  -- a plain find, then a match anchored there: a pattern search from the
  -- start tries every position of the reply (about 2 µs per call)
  local at = string.find(info, 'master_replid:', 1, true)
  local rid = at and string.match(info, '^%w+', at + 14)
  if not rid then return '', 'no master_replid in INFO replication' end
  return rid
end

-- epoch_node returns the epoch to mint with on Redis Cluster, where key is
-- the epoch record in the slot of the keys the script mints for (a queue's
-- or a resource's; same fields as the namespace's record): the epoch
-- recorded for this master's replication id while it is the highest
-- recorded, or, on the first mint of a tenure (a promoted replica, a
-- restarted master, a slot moved here, or moved back after another
-- master's tenure recorded a higher epoch), the node's config epoch
-- (CLUSTER INFO cluster_my_epoch, which the cluster raised above every
-- other when it elected this node) when it is above every epoch recorded,
-- else one more than the highest. It needs nothing from the caller: the
-- slot's master decides, in the script. '' rid (INFO denied): 0, as
-- epoch_check.
local function epoch_node(key)
  local rid = epoch_replid()
  if rid == '' then return 0 end
  local r = redis.call('HMGET', key, 'r:' .. rid, 'max')
  local rec, mx = tonumber(r[1] or ''), tonumber(r[2] or '')
  if rec and (not mx or rec >= mx) then return rec end
  local ci = redis.pcall('CLUSTER', 'INFO')
  local f = type(ci) == 'string' and tonumber(string.match(ci, 'cluster_my_epoch:(%d+)') or '')
  local e
  if f and (not mx or f > mx) then e = f elseif mx then e = mx + 1 else e = 0 end
  if e > EPOCH_MAX then e = EPOCH_MAX end
  redis.call('HSET', key, 'r:' .. rid, string.format('%d', e))
  if not mx or e > mx then redis.call('HSET', key, 'max', string.format('%d', e)) end
  -- Keep the newest 32 tenures: older replication ids never mint again.
  if redis.call('HLEN', key) > 40 then
    local all, ids = redis.call('HGETALL', key), {}
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'r:' and all[i] ~= 'r:' .. rid then
        table.insert(ids, {all[i], tonumber(all[i + 1]) or 0})
      end
    end
    table.sort(ids, function(a, b) return a[2] < b[2] end)
    for i = 1, #ids - 31 do redis.call('HDEL', key, ids[i][1]) end
  end
  return e
end

-- epoch_check checks a minting script's epoch arguments against the node it
-- runs on. rid is the replication id of the primary the caller's epoch ep
-- is for ('' or nil: epochs off, mint in epoch 0; '@node' on Redis
-- Cluster: the slot's master decides, see epoch_node); born is the birth
-- of the record the caller learned ep from; key is the namespace's epoch
-- record, a hash 'r:<replication id>' -> epoch, 'max' -> the highest epoch
-- recorded, 'born' -> when the record was created (advance.lua). It
-- returns the epoch to mint with, or nil and {replication id, recorded
-- epoch or ''} when the caller must refresh its epoch (internal/epoch
-- Tracker.Refresh) and run again: this node is another primary (a
-- failover or restart happened), or the record does not hold exactly the
-- caller's epoch and birth (another caller raised it, or the record was
-- lost: a flush, a restart without persistence). Nothing is written: only
-- a refresh assigns epochs, so a record that lost an epoch is moved above
-- it by a caller that knew it.
-- pre, pre_born, when pre is not nil, are the record's 'r:<rid>' and
-- 'born' fields as epoch_now read them (false: absent), so the record is
-- read once.
local function epoch_check(key, rid, ep, born, pre, pre_born)
  if rid == nil or rid == '' then return 0 end
  if rid == '@node' then return epoch_node(key) end
  local e = tonumber(ep)
  if not e or e < 0 or e > EPOCH_MAX or e ~= math.floor(e) then
    error({err = 'FENCEDQ invalid epoch ' .. tostring(ep)})
  end
  local mine = epoch_replid()
  if mine ~= rid then return nil, {mine, ''} end
  if pre == nil then
    local f = redis.call('HMGET', key, 'r:' .. mine, 'born')
    pre, pre_born = f[1], f[2]
  end
  local rec = tonumber(pre or '')
  if rec ~= e or (pre_born or '') ~= (born or '') then
    return nil, {mine, rec and string.format('%d', rec) or ''}
  end
  return e
end

-- CLOCK_SLACK_US: how far (µs) this primary's clock may fall behind the
-- namespace's time before epoch_now looks for a new tenure or a clock
-- stepped back. Below it, time just holds at the high-water mark.
local CLOCK_SLACK_US = 1000000
-- CATCH_UP_DIV: while the namespace's time is behind the primary's clock (a
-- negative offset), it runs 1 µs faster per CATCH_UP_DIV µs (1 %) until it
-- meets the clock: a due time or lease deadline set meanwhile comes at most
-- 1 % of its delay early, well inside a lease's safety margin (10 % of the
-- TTL by default).
local CATCH_UP_DIV = 100
-- CATCH_UP_MAX_US: the most a new tenure's time may start behind its
-- clock (µs); a larger gap (a tenure starting after a long outage or idle
-- spell: nothing live to end early) is jumped, all but this much. It is
-- also the longest gap between calls taken for real time while a positive
-- offset is carried: live pools raise the mark every second or so (the
-- maintenance leader's passes, renewals, claims), so the clock moving
-- further past the mark than this between two calls is a step forward (the
-- node's clock set right), absorbed into the offset.
local CATCH_UP_MAX_US = 60000000

-- on_cluster reports whether this node runs Redis Cluster, where a queue's
-- or a resource's own clock record is raised by calls on it alone (a quiet
-- one goes minutes without a call while pools are live).
local function on_cluster()
  local info = redis.pcall('INFO', 'cluster')
  return type(info) == 'string' and string.find(info, 'cluster_enabled:1', 1, true) ~= nil
end

-- epoch_max_seen is the clock record's 'max' (the highest epoch recorded,
-- which rises with each primary tenure) as the latest epoch_now read it, or
-- false: internal/ledger's write sequence marks where a tenure began.
local epoch_max_seen = false

-- epoch_now returns the namespace's time in µs: the time every due time,
-- lease deadline and next look of the namespace is written and read in.
-- It is Redis TIME plus the offset of the current primary's tenure, never
-- below the high-water mark of every time returned before, so it continues
-- from where the previous primary left it (at most the replication lag
-- behind), whatever the promoted node's clock says. key is the clock
-- record, a hash: 'clk' the high-water mark (µs: the last microsecond of
-- the latest time's millisecond), 'crid' the replication id the offset is
-- for, 'coff' the offset (µs), 'cat' the TIME (µs) a negative offset was
-- set at; nil for none (plain TIME).
-- The offset is computed once per tenure, by the first call that finds it
-- was computed for another replication id (INFO is only asked while the
-- offset is not 0, or when TIME falls more than CLOCK_SLACK_US below the
-- mark): mark - TIME, so the time goes on from the mark whichever way the
-- new node's clock is off. A node behind keeps its positive offset; a node
-- ahead (failing back to a true clock after a tenure that started behind
-- it by the failover's time) gets a negative one that shrinks to 0 at 1 %
-- (CATCH_UP_DIV): time never jumps forward by a failover, so leases granted
-- and delays set before it do not end early. A clock stepped back on the
-- same primary raises its offset likewise.
-- A positive offset absorbs a step forward of the node's clock too (the
-- clock set right while still below the mark, or any forward jump): a call
-- that finds TIME + offset more than CATCH_UP_MAX_US past the mark lowers
-- the offset (down to 0) so the time goes on from the mark, late rather
-- than early; a real idle spell that long makes due times set before it
-- come late by up to the spell. A read (peek) computes the same time and
-- records nothing: the write after it absorbs the step. (A read alone
-- past CATCH_UP_MAX_US of a spell with no write thus goes back to the
-- mark: reads are not what the mark holds.) Not on Redis Cluster, where
-- a quiet queue's or resource's record leaves such gaps while pools live.
-- With want (a replication id, as a minting script's caller passes it to
-- epoch_check), the same read also returns the record's 'r:<want>' and
-- 'born' fields (false: absent) as second and third values, for
-- epoch_check's pre and pre_born.
-- With peek (a read: holder.lua, the namespace's time for an inspector),
-- the same time is returned and the mark is not moved, nor a record
-- created where there is none. A new tenure's offset is still recorded
-- (once per tenure): without it every read would compute the tenure's
-- start again, and a time held at the mark would never move on.
local function epoch_now(key, want, peek)
  local t = redis.call('TIME')
  local raw = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if not key then return raw end
  local c
  if want and want ~= '' then
    c = redis.call('HMGET', key, 'clk', 'crid', 'coff', 'max', 'r:' .. want, 'born')
  else
    c = redis.call('HMGET', key, 'clk', 'crid', 'coff', 'max')
  end
  epoch_max_seen = c[4]
  local clk, base = tonumber(c[1] or ''), tonumber(c[3] or '') or 0
  local off = base
  if base < 0 then -- catching up with this node's clock
    local at = tonumber(redis.call('HGET', key, 'cat') or '')
    off = at and math.min(0, base + math.floor((raw - at) / CATCH_UP_DIV)) or 0
  end
  local now = raw + off
  if clk and (base ~= 0 or now < clk - CLOCK_SLACK_US) then
    local rid, crid, noff = epoch_replid(), c[2] or '', off
    local keep = false -- a read's step: computed as a write would, not recorded
    if rid ~= crid or now < clk - CLOCK_SLACK_US then
      -- a new tenure (failover, restart), or this primary's clock stepped
      -- back: go on from the mark
      noff = math.max(clk - raw, -CATCH_UP_MAX_US)
    elseif off > 0 and now > clk + CATCH_UP_MAX_US and not on_cluster() then
      -- this primary's clock stepped forward (no live pool leaves such a
      -- gap): go on from the mark, late rather than early
      noff = math.max(clk - raw, 0)
      keep = peek
    end
    if rid == '' and raw >= clk then noff = 0 end -- no INFO: the clock alone has caught up
    -- A clock stepped back (a positive offset) and set right is back at
    -- the mark by itself (within the slack, where the time holds at the
    -- mark): raw + offset would jump ahead of the clock by the step.
    if noff > 0 and raw >= clk - CLOCK_SLACK_US then noff = 0 end
    if not keep and (rid ~= crid or noff ~= off or (noff == 0 and base ~= 0)) then
      if noff < 0 then
        redis.call('HSET', key, 'crid', rid, 'coff', string.format('%d', noff), 'cat', string.format('%d', raw))
      else
        redis.call('HSET', key, 'crid', rid, 'coff', string.format('%d', noff))
      end
    end
    now = raw + noff
  end
  if clk and now <= clk then return clk, c[5], c[6] end
  if peek then return now, c[5], c[6] end
  -- The mark is written once per millisecond: the last microsecond of
  -- now's millisecond, which no time returned before exceeds and which
  -- later calls in this millisecond return (their milliseconds are now's).
  redis.call('HSET', key, 'clk', string.format('%d', now - now % 1000 + 999))
  return now, c[5], c[6]
end
