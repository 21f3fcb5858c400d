//! grib (noritada/grib-rs) adapter, pure-Rust features.
use common::Adapter;
use grib::{Grib2SubmessageDecoder, LatLons};

struct G;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

impl Adapter for G {
    fn name(&self) -> &'static str {
        "grib-0.20.2"
    }
    fn native_f32(&self) -> bool {
        true
    }
    fn list(&self, file: &[u8]) -> Result<Vec<(usize, usize)>, String> {
        let g = grib::from_bytes(file).map_err(s)?;
        let mut out: Vec<(usize, usize)> = Vec::new();
        for (_idx, sub) in g.iter() {
            let m = (sub.0.body.offset, sub.indicator().total_length as usize);
            if out.last() != Some(&m) {
                out.push(m);
            }
        }
        Ok(out)
    }
    fn decode(&self, msg: &[u8]) -> Result<Vec<Vec<f64>>, String> {
        let g = grib::from_bytes(msg).map_err(s)?;
        let mut out = Vec::new();
        for (_idx, sub) in g.iter() {
            let d = Grib2SubmessageDecoder::from(sub).map_err(s)?;
            let v: Vec<f64> = d.dispatch().map_err(s)?.map(f64::from).collect();
            out.push(v);
        }
        Ok(out)
    }
    fn latlons(&self, msg: &[u8]) -> Result<Vec<(Vec<f64>, Vec<f64>)>, String> {
        let g = grib::from_bytes(msg).map_err(s)?;
        let mut out = Vec::new();
        for (_idx, sub) in g.iter() {
            let (la, lo): (Vec<f64>, Vec<f64>) = sub.latlons().map_err(s)?.unzip();
            out.push((la, lo));
        }
        Ok(out)
    }
    fn meta(&self, msg: &[u8]) -> Result<Vec<String>, String> {
        let g = grib::from_bytes(msg).map_err(s)?;
        let mut out = Vec::new();
        for (idx, sub) in g.iter() {
            let s3 = sub.section3().map_err(s)?;
            let pd = sub.prod_def();
            let id = sub.identification();
            let sm = format!("{:?}", s3.payload.template);
            let scan = sm.find("scanning_mode").map(|i| sm[i..].chars().take(30).collect::<String>());
            out.push(format!(
                "idx={idx:?} disc={} gdt={} npts={} shape={:?} scan={:?} pdt={} cat={:?} num={:?} surf={:?} ft={:?} ref={:?} drt={}",
                sub.indicator().discipline,
                sub.grid_def().grid_tmpl_num(),
                sub.grid_def().num_points(),
                sub.grid_shape().ok(),
                scan,
                pd.prod_tmpl_num(),
                pd.parameter_category(),
                pd.parameter_number(),
                pd.fixed_surfaces().map(|(a, _)| (a.surface_type, a.value())),
                pd.forecast_time().map(|f| f.to_string()),
                id.ref_time_unchecked().to_string(),
                sub.repr_def().repr_tmpl_num(),
            ));
        }
        Ok(out)
    }
}

fn main() {
    common::main_with(&G);
}
