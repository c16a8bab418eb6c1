package store

// GrainRow is a stored grain. Personal fields exist only inside Blob; the
// token columns are 16-byte blind tokens (nil when the field is empty).
//
// Each token column has its own index, with no memory column: a token is
// keyed by its memory's and scope's keys, so equal tokens in two memories
// occur with probability 2^-128. A pattern of several fields is answered by
// the index of its most selective field. Composite indexes would answer
// multi-field patterns more directly, but every index of a random token
// costs each insert a random page; three composites cost a PostgreSQL batch
// insert twice what three single-column indexes do (docs/performance.md).
//
// Every index that finds rows for recall (the tokens, user_key_id, scope,
// memory) ends with the id, so that the rows of one value come newest first
// without a sort (see DB.findQuery). SQLite appends the rowid to every index
// by itself; PostgreSQL's indexes name it. The indexes are made in migrate:
// the hash's is a unique btree on SQLite and a hash index on PostgreSQL,
// and the scope's has text_pattern_ops on PostgreSQL, so that scope prefixes
// (LIKE 'a/b/%') use it whatever the database's collation.
type GrainRow struct {
	ID              int64   `gorm:"primaryKey;autoIncrement"`
	Hash            string  `gorm:"size:64;not null"`
	Memory          string  `gorm:"size:64;not null"`
	Type            string  `gorm:"size:32;not null"`
	Namespace       string  `gorm:"size:128;not null"`
	Scope           string  `gorm:"size:512;not null"`
	Importance      float64 `gorm:"type:double precision;not null"`
	Confidence      float64 `gorm:"type:double precision;not null"`
	Salience        float64 `gorm:"type:double precision;not null"`
	Pinned          bool    `gorm:"not null"`
	Archived        bool    `gorm:"not null"`
	CreatedUS       int64   `gorm:"column:created_us;not null"`
	LastRetrievedUS int64   `gorm:"column:last_retrieved_us;not null"`
	RetrievalCount  int64   `gorm:"not null"`
	Supersedes      string  `gorm:"size:64;not null"`
	SupersededBy    string  `gorm:"size:64;not null"`
	KeyChain        string  `gorm:"size:256;not null"`
	UserKeyID       int64   `gorm:"not null"`
	UserRef         []byte
	SubjectTok      []byte `gorm:"column:s_tok"`
	RelationTok     []byte `gorm:"column:r_tok"`
	ObjectTok       []byte `gorm:"column:o_tok"`
	DedupTok        []byte `gorm:"column:dedup_tok;not null"`
	Blob            []byte `gorm:"not null"`

	Tags []TagRow `gorm:"-"`
	// Terms, DocLen and Dim are the grain's text postings (TermRow, their
	// GrainID unset), its length in terms and its embedding's dimension,
	// stored with it (see DocRow).
	Terms  []TermRow `gorm:"-"`
	DocLen int       `gorm:"-"`
	Dim    int       `gorm:"-"`
	// Erased marks a version Chain could not read because it was erased:
	// only Hash and Memory are set.
	Erased bool `gorm:"-"`
	// Epoch is the memory's erase epoch, read with the row (see EpochRow).
	Epoch int64 `gorm:"->;column:erase_epoch;-:migration"`
	// ScopeGen is the memory's scope generation, read with the row (see
	// ScopeGenRow); FindGrains only.
	ScopeGen int64 `gorm:"->;column:scope_gen;-:migration"`
}

// TableName is the grains table.
func (GrainRow) TableName() string { return "grains" }

// TagRow is one blind tag token of a grain. Its index is (token, grain_id),
// so that a tag's grains can be read newest first without a sort.
type TagRow struct {
	GrainID int64  `gorm:"primaryKey;autoIncrement:false;index:idx_grain_tags_tg,priority:2"`
	Token   []byte `gorm:"primaryKey;index:idx_grain_tags_tg,priority:1"`
	Memory  string `gorm:"size:64;not null"`
}

// TableName is the tag token table.
func (TagRow) TableName() string { return "grain_tags" }

// KeyRow is a wrapped data key. DestroyedUS is 0 while the key lives.
type KeyRow struct {
	ID          int64  `gorm:"primaryKey;autoIncrement"`
	Memory      string `gorm:"size:64;not null;index:idx_data_keys_scope,priority:1"`
	Kind        string `gorm:"size:8;not null;index:idx_data_keys_scope,priority:2"`
	Name        string `gorm:"size:512;not null;index:idx_data_keys_scope,priority:3"`
	Wrapped     []byte
	Fingerprint string `gorm:"size:64;not null"`
	CreatedUS   int64  `gorm:"column:created_us;not null"`
	DestroyedUS int64  `gorm:"column:destroyed_us;not null"`
}

// TableName is the data keys table.
func (KeyRow) TableName() string { return "data_keys" }
