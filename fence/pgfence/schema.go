package pgfence

import (
	"fmt"
	"log/slog"
	"regexp"

	"github.com/jackc/pgx/v5"
)

// DefaultTablePrefix is the table prefix used when Options.TablePrefix is
// empty.
const DefaultTablePrefix = "fencedq_"

// NoTablePrefix, as Options.TablePrefix, names the tables without a prefix
// (fences, effects, outbox, migrations): the names pgfence used before
// table prefixes had a default.
const NoTablePrefix = "-"

// Options chooses where the tables live. The zero value puts tables named
// fencedq_fences, fencedq_effects, fencedq_outbox and fencedq_migrations in
// the first schema of the connection's search_path.
type Options struct {
	// Schema, when set, qualifies every table; Migrate creates it if
	// absent. It must be a plain identifier: a letter or underscore, then
	// letters, digits or underscores, at most 63 bytes.
	Schema string
	// TablePrefix is prepended to the table names (default
	// DefaultTablePrefix; NoTablePrefix for none), e.g. "fq_" gives
	// fq_fences, fq_effects, fq_outbox and fq_migrations. Same character
	// rules as Schema; at most 40 bytes.
	TablePrefix string
	// Logger receives an Outbox's warnings: each row its relay sets aside
	// (default slog.Default()). Store and Migrate log nothing.
	Logger *slog.Logger
}

// MigrateLockID is the pg_advisory_xact_lock key Migrate holds while it
// applies migrations, so that many workers can migrate concurrently.
const MigrateLockID int64 = 0x66715f66656e6365 // "fq_fence"

// prefix is the table prefix in use.
func (o Options) prefix() string {
	switch o.TablePrefix {
	case "":
		return DefaultTablePrefix
	case NoTablePrefix:
		return ""
	}
	return o.TablePrefix
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (o Options) validate() error {
	if o.Schema != "" && (!identRE.MatchString(o.Schema) || len(o.Schema) > 63) {
		return fmt.Errorf("%w: schema %q is not a plain identifier of at most 63 bytes", ErrOptions, o.Schema)
	}
	if o.TablePrefix != "" && o.TablePrefix != NoTablePrefix && (!identRE.MatchString(o.TablePrefix) || len(o.TablePrefix) > 40) {
		return fmt.Errorf("%w: table prefix %q is not a plain identifier of at most 40 bytes", ErrOptions, o.TablePrefix)
	}
	return nil
}

type tables struct {
	// quoted, schema-qualified where set
	fences, effects, outbox, migrations string
	// fenceCheck is the function ApplyBatch's check calls (migration 4);
	// quoted, schema-qualified where set.
	fenceCheck string
	// quoted, unqualified (index names take the table's schema)
	effectsIdx, effectsAgeIdx, outboxIdx, outboxPendingIdx string
}

func (o Options) tables() tables {
	p := o.prefix()
	q := func(name string) string {
		if o.Schema != "" {
			return pgx.Identifier{o.Schema, p + name}.Sanitize()
		}
		return pgx.Identifier{p + name}.Sanitize()
	}
	return tables{
		fences:        q("fences"),
		effects:       q("effects"),
		outbox:        q("outbox"),
		migrations:    q("migrations"),
		fenceCheck:    q("fence_check"),
		effectsIdx:    pgx.Identifier{p + "effects_resource_idx"}.Sanitize(),
		effectsAgeIdx: pgx.Identifier{p + "effects_applied_at_idx"}.Sanitize(),
		outboxIdx:     pgx.Identifier{p + "outbox_seq_idx"}.Sanitize(),
		// the rows a relay takes: those not set aside (migration 5)
		outboxPendingIdx: pgx.Identifier{p + "outbox_pending_idx"}.Sanitize(),
	}
}
