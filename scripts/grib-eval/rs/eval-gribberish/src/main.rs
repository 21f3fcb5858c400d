//! gribberish adapter (default: png only, pure Rust; feature `jpeg` adds openjpeg-sys).
use common::Adapter;
use gribberish::message::{Message, read_messages};

struct B;

fn s<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

fn open(msg: &[u8]) -> Result<Message<'_>, String> {
    Message::from_data(msg, 0).ok_or_else(|| "not a GRIB message".to_string())
}

impl Adapter for B {
    fn name(&self) -> &'static str {
        if cfg!(feature = "jpeg") { "gribberish-1.9.0+jpeg" } else { "gribberish-1.9.0" }
    }
    fn native_f32(&self) -> bool {
        false
    }
    fn list(&self, file: &[u8]) -> Result<Vec<(usize, usize)>, String> {
        Ok(read_messages(file).map(|m| (m.byte_offset(), m.len())).collect())
    }
    fn decode(&self, msg: &[u8]) -> Result<Vec<Vec<f64>>, String> {
        Ok(vec![open(msg)?.data().map_err(s)?])
    }
    fn latlons(&self, msg: &[u8]) -> Result<Vec<(Vec<f64>, Vec<f64>)>, String> {
        let m = open(msg)?;
        let p = m.latlng_projector().map_err(s)?;
        let (la, lo) = p.lat_lng();
        let (ny, nx) = m.grid_dimensions().map_err(s)?;
        if p.is_regular_latlng_grid() && la.len() == ny && lo.len() == nx && ny * nx != la.len() {
            // 1-D axes: expand to per-point, rows (j) outer
            let mut a = Vec::with_capacity(ny * nx);
            let mut b = Vec::with_capacity(ny * nx);
            for &y in &la {
                for &x in &lo {
                    a.push(y);
                    b.push(x);
                }
            }
            return Ok(vec![(a, b)]);
        }
        Ok(vec![(la, lo)])
    }
    fn meta(&self, msg: &[u8]) -> Result<Vec<String>, String> {
        let m = open(msg)?;
        let ed = match m { Message::Grib1 { .. } => 1, Message::Grib2 { .. } => 2 };
        Ok(vec![format!(
            "ed={ed} disc={:?} gdt={:?} dims={:?} drt={:?} pdt={:?} cat={:?} num={:?} name={:?} surf={:?} ref={:?} fc={:?} bitmap={}",
            m.discipline_value().ok(),
            m.grid_template_id().ok(),
            m.grid_dimensions().ok(),
            m.data_template_number().ok(),
            m.product_template_id().ok(),
            m.category_value().ok(),
            m.parameter_value().ok(),
            m.variable_abbrev().ok(),
            m.first_fixed_surface().ok(),
            m.reference_date().ok().map(|d| d.to_rfc3339()),
            m.forecast_date().ok().map(|d| d.to_rfc3339()),
            m.has_bitmap(),
        )])
    }
}

fn main() {
    common::main_with(&B);
}
