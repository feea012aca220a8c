//! The two backends behind one small statement interface: every query of the trusted store
//! is written once (SQLite's `?N` placeholders, `"user"` quoted as both engines accept) and
//! run by [`Db`] on SQLite or PostgreSQL.

use super::pg::PgConn;
use rusqlite::Connection;

/// A value bound to a statement or read from a row (the store only uses integers and text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    /// An integer (SQLite `INTEGER`, PostgreSQL `BIGINT`).
    Int(i64),
    /// Text.
    Text(String),
    /// SQL `NULL` (only bound to text columns).
    Null,
}

impl From<i64> for Val {
    fn from(v: i64) -> Self {
        Val::Int(v)
    }
}

impl From<u32> for Val {
    fn from(v: u32) -> Self {
        Val::Int(i64::from(v))
    }
}

impl From<&str> for Val {
    fn from(v: &str) -> Self {
        Val::Text(v.to_string())
    }
}

impl From<&String> for Val {
    fn from(v: &String) -> Self {
        Val::Text(v.clone())
    }
}

impl From<String> for Val {
    fn from(v: String) -> Self {
        Val::Text(v)
    }
}

impl From<Option<&str>> for Val {
    fn from(v: Option<&str>) -> Self {
        v.map_or(Val::Null, Val::from)
    }
}

/// One result row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row(pub Vec<Val>);

impl Row {
    /// Column `i` as an integer (0 for anything else: the schema makes it an integer).
    pub fn int(&self, i: usize) -> i64 {
        match self.0.get(i) {
            Some(Val::Int(v)) => *v,
            _ => 0,
        }
    }

    /// Column `i` as text (empty for `NULL`).
    pub fn text(&self, i: usize) -> String {
        self.opt_text(i).unwrap_or_default()
    }

    /// Column `i` as text, `None` for `NULL`.
    pub fn opt_text(&self, i: usize) -> Option<String> {
        match self.0.get(i) {
            Some(Val::Text(v)) => Some(v.clone()),
            Some(Val::Int(v)) => Some(v.to_string()),
            _ => None,
        }
    }
}

/// A failure of the engine underneath.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite refused.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL refused, or the connection to it failed.
    #[error(transparent)]
    Postgres(#[from] postgres::Error),
    /// The PostgreSQL server cannot be reached (or the connection broke inside a
    /// transaction, which is then rolled back by the server).
    #[error("PostgreSQL unreachable: {0}")]
    Unreachable(String),
}

/// The connection of one [`Store`](super::Store).
pub enum Db {
    /// The embedded database of a single host.
    Sqlite(Connection),
    /// A fleet's shared database.
    Postgres(PgConn),
}

impl Db {
    /// Runs a statement; returns the rows it changed.
    pub fn exec(&self, sql: &str, args: &[Val]) -> Result<u64, DbError> {
        match self {
            Db::Sqlite(c) => Ok(c.execute(sql, rusqlite::params_from_iter(args.iter().map(sqlite_val)))? as u64),
            Db::Postgres(p) => p.exec(pg_sql(sql), args.to_vec()),
        }
    }

    /// Runs a query and returns its rows.
    pub fn query(&self, sql: &str, args: &[Val]) -> Result<Vec<Row>, DbError> {
        match self {
            Db::Sqlite(c) => {
                let mut st = c.prepare_cached(sql)?;
                let n = st.column_count();
                let rows = st.query_map(rusqlite::params_from_iter(args.iter().map(sqlite_val)), |r| {
                    (0..n)
                        .map(|i| {
                            Ok(match r.get_ref(i)? {
                                rusqlite::types::ValueRef::Integer(v) => Val::Int(v),
                                rusqlite::types::ValueRef::Text(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
                                rusqlite::types::ValueRef::Null => Val::Null,
                                rusqlite::types::ValueRef::Real(v) => Val::Int(v as i64),
                                rusqlite::types::ValueRef::Blob(b) => Val::Text(String::from_utf8_lossy(b).into_owned()),
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map(Row)
                })?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            }
            Db::Postgres(p) => p.query(pg_sql(sql), args.to_vec()),
        }
    }

    /// Runs statements without parameters (`BEGIN`, `COMMIT`, a migration).
    pub fn batch(&self, sql: &str) -> Result<(), DbError> {
        match self {
            Db::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Db::Postgres(p) => p.batch(sql.to_string()),
        }
    }
}

fn sqlite_val(v: &Val) -> rusqlite::types::Value {
    match v {
        Val::Int(i) => rusqlite::types::Value::Integer(*i),
        Val::Text(t) => rusqlite::types::Value::Text(t.clone()),
        Val::Null => rusqlite::types::Value::Null,
    }
}

/// The statement with SQLite's `?N` placeholders written as PostgreSQL's `$N` (the store's
/// statements hold no `?` elsewhere).
pub fn pg_sql(sql: &str) -> String {
    sql.replace('?', "$")
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_rewritten_for_postgres() {
        assert_eq!(super::pg_sql("SELECT a FROM t WHERE x = ?1 AND y = ?2"), "SELECT a FROM t WHERE x = $1 AND y = $2");
    }
}
