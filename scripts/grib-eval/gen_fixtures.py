#!/usr/bin/env python3
"""Write GRIB1/GRIB2 fixture files with ecCodes and record ecCodes's decoding.

For each fixture  fixtures/NAME.grib{1,2}  it writes
  fixtures/NAME.json        manifest: one entry per message (offset, length, keys)
  fixtures/NAME.values.f64  ecCodes codes_get_values (float64 LE), messages concatenated
  fixtures/NAME.lats.f64    ecCodes latitudes  (float64 LE), messages concatenated
  fixtures/NAME.lons.f64    ecCodes longitudes (float64 LE), messages concatenated
Missing points keep ecCodes's missingValue (9999 unless set) in .values.f64.

Usage: venv/bin/python gen_fixtures.py [--big]   (--big also writes the 721x1440 timing fields)
"""
import json
import os
import sys

import numpy as np
import eccodes as ec

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
os.makedirs(OUT, exist_ok=True)
RNG = np.random.default_rng(12345)
MISSING = 9999.0

REPORT = []  # (name, status)


def field(lats, lons, noise=0.3, smooth=False):
    la = np.deg2rad(lats)
    lo = np.deg2rad(lons)
    v = 273.15 + 30 * np.cos(la) + 10 * np.sin(2 * lo) * np.cos(la) + 5 * np.sin(3 * la) * np.cos(lo)
    if not smooth:
        v = v + RNG.normal(0, noise, v.shape)
    return v.astype(np.float64)


def set_regular_ll(h, ni, nj, lat0=90.0, lat1=-90.0, lon0=0.0, dlon=None):
    dlon = dlon if dlon is not None else 360.0 / ni
    dlat = abs(lat0 - lat1) / (nj - 1)
    ec.codes_set(h, "Ni", ni)
    ec.codes_set(h, "Nj", nj)
    ec.codes_set(h, "latitudeOfFirstGridPointInDegrees", lat0)
    ec.codes_set(h, "latitudeOfLastGridPointInDegrees", lat1)
    ec.codes_set(h, "longitudeOfFirstGridPointInDegrees", lon0)
    ec.codes_set(h, "longitudeOfLastGridPointInDegrees", lon0 + dlon * (ni - 1))
    ec.codes_set(h, "iDirectionIncrementInDegrees", dlon)
    ec.codes_set(h, "jDirectionIncrementInDegrees", dlat)
    if lat0 < lat1:
        ec.codes_set(h, "jScansPositively", 1)
    fix_npoints(h, ni * nj)


def fix_npoints(h, n):
    # GRIB2 keeps numberOfDataPoints in section 3 and does not recompute it from Ni x Nj
    if ec.codes_get(h, "edition") == 2:
        ec.codes_set(h, "numberOfDataPoints", n)


def latlon_of(h):
    return (np.asarray(ec.codes_get_array(h, "latitudes"), dtype=np.float64),
            np.asarray(ec.codes_get_array(h, "longitudes"), dtype=np.float64))


def common_keys(h):
    ec.codes_set(h, "dataDate", 20240115)
    ec.codes_set(h, "dataTime", 600)


def new_ll(sample="regular_ll_sfc_grib2", ni=72, nj=37, **kw):
    h = ec.codes_grib_new_from_samples(sample)
    common_keys(h)
    set_regular_ll(h, ni, nj, **kw)
    return h


def pack(h, values, packing, bits=16, extra=None, pre=None, bitmap=False):
    """Simple-pack the values, then switch to `packing`, then apply `extra` keys."""
    if pre:
        for k, v in pre.items():
            ec.codes_set(h, k, v)
    if bitmap:
        ec.codes_set(h, "missingValue", MISSING)
        ec.codes_set(h, "bitmapPresent", 1)
    ec.codes_set(h, "bitsPerValue", bits)
    ec.codes_set_values(h, values)
    if packing != "grid_simple":
        ec.codes_set(h, "packingType", packing)
    if extra:
        for k, v in extra.items():
            ec.codes_set(h, k, v)
        ec.codes_set_values(h, values)  # re-encode with the new settings
    return h


KEYS = ["edition", "packingType", "gridType", "bitsPerValue", "numberOfDataPoints",
        "numberOfValues", "numberOfMissing", "bitmapPresent", "missingValue",
        "Ni", "Nj", "Nx", "Ny", "scanningMode", "iScansNegatively", "jScansPositively",
        "gridDefinitionTemplateNumber", "productDefinitionTemplateNumber",
        "dataRepresentationTemplateNumber", "discipline", "parameterCategory",
        "parameterNumber", "indicatorOfParameter", "table2Version", "shortName",
        "typeOfFirstFixedSurface", "indicatorOfTypeOfLevel", "level", "typeOfLevel",
        "forecastTime", "stepRange", "dataDate", "dataTime",
        "orderOfSpatialDifferencing", "precision", "decimalScaleFactor",
        "binaryScaleFactor", "referenceValue"]


def describe(h):
    d = {}
    for k in KEYS:
        try:
            if ec.codes_is_defined(h, k) and not ec.codes_is_missing(h, k):
                t = ec.codes_get_native_type(h, k)
                d[k] = ec.codes_get(h, k, ktype=t) if t in (int, float, str) else ec.codes_get(h, k)
        except Exception:
            pass
    return d


def write_file(name, handles, ext):
    """Write handles to NAME.ext, then reread the file with ecCodes to record its decoding."""
    path = os.path.join(OUT, name + "." + ext)
    with open(path, "wb") as f:
        for h in handles:
            ec.codes_write(h, f)
    for h in handles:
        ec.codes_release(h)
    record(name, path)


def record(name, path, multi=False):
    msgs, vals, lats, lons = [], [], [], []
    if multi:
        ec.codes_grib_multi_support_on()
    with open(path, "rb") as f:
        while True:
            h = ec.codes_grib_new_from_file(f)
            if h is None:
                break
            v = np.asarray(ec.codes_get_values(h), dtype=np.float64)
            try:
                la, lo = latlon_of(h)
            except Exception as e:  # some grids have no coordinates in ecCodes
                la = lo = np.full(v.shape, np.nan)
            d = describe(h)
            d["offset"] = int(ec.codes_get_message_offset(h))
            d["length"] = int(ec.codes_get_message_size(h))
            if multi:  # a field of a multi-field message: the message's own length from section 0
                with open(path, "rb") as g:
                    g.seek(d["offset"])
                    s0 = g.read(16)
                d["length"] = int.from_bytes(s0[8:16], "big")
            d["n"] = int(v.size)
            d["min"] = float(v[v != d.get("missingValue", MISSING)].min()) if v.size else None
            d["max"] = float(v[v != d.get("missingValue", MISSING)].max()) if v.size else None
            msgs.append(d)
            vals.append(v)
            lats.append(la)
            lons.append(lo)
            ec.codes_release(h)
    if multi:
        ec.codes_grib_multi_support_off()
    np.concatenate(vals).astype("<f8").tofile(os.path.join(OUT, name + ".values.f64"))
    np.concatenate(lats).astype("<f8").tofile(os.path.join(OUT, name + ".lats.f64"))
    np.concatenate(lons).astype("<f8").tofile(os.path.join(OUT, name + ".lons.f64"))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump({"file": os.path.basename(path), "multi_field": multi, "messages": msgs}, f, indent=1)
    REPORT.append((name, "ok", [(m.get("packingType"), m.get("gridType"), m["n"]) for m in msgs]))


def attempt(name, fn):
    try:
        fn()
    except Exception as e:
        REPORT.append((name, "REFUSED by ecCodes: %s" % e, []))


def ll_values(h):
    la, lo = latlon_of(h)
    return la, lo


def gen_packing(name, packing, bits=16, extra=None, bitmap=False, smooth=False, sample="regular_ll_sfc_grib2",
                ext="grib2", ni=72, nj=37, noise=0.3, const=False, offset=0.0, **llkw):
    def fn():
        h = new_ll(sample, ni, nj, **llkw)
        la, lo = ll_values(h)
        v = field(la, lo, noise=noise, smooth=smooth)
        v = v + offset
        if const:
            v[:] = 287.5
        if bitmap:
            m = RNG.random(v.size) < 0.15
            m[:ni] = True  # a whole first row missing
            m[-5:] = True
            v[m] = MISSING
        pack(h, v, packing, bits=bits, extra=extra, bitmap=bitmap)
        write_file(name, [h], ext)
    attempt(name, fn)


def patch_decimal(src, dst, d):
    """Copy fixture `src` with the decimal scale factor D of section 5 (octets 18-19, GRIB2
    templates 5.0/5.2/5.3/5.40/5.41/5.42 alike) set to `d`: a valid message whose values are the
    original ones times 10^-d. ecCodes's packers turn D into a binary scale for complex packing
    and CCSDS, so this is the way to get D != 0 for every packing."""
    def fn():
        b = bytearray(open(os.path.join(OUT, src + ".grib2"), "rb").read())
        pos = 16
        while b[pos + 4] != 5:
            pos += int.from_bytes(b[pos:pos + 4], "big")
        mag = abs(d) | (0x8000 if d < 0 else 0)  # sign and magnitude
        b[pos + 17:pos + 19] = mag.to_bytes(2, "big")
        path = os.path.join(OUT, dst + ".grib2")
        open(path, "wb").write(bytes(b))
        record(dst, path)
    attempt(dst, fn)


def main(big):
    # --- GRIB2 regular lat/lon, one fixture per packing ------------------------------------
    gen_packing("g2_simple16", "grid_simple", 16)
    gen_packing("g2_simple12", "grid_simple", 12)
    gen_packing("g2_simple24", "grid_simple", 24)
    gen_packing("g2_simple_const", "grid_simple", 16, const=True)
    gen_packing("g2_simple_bitmap", "grid_simple", 16, bitmap=True)
    gen_packing("g2_complex", "grid_complex", 16)
    gen_packing("g2_complex_bitmap", "grid_complex", 16, bitmap=True)
    gen_packing("g2_csd1", "grid_complex_spatial_differencing", 16, extra={"orderOfSpatialDifferencing": 1})
    gen_packing("g2_csd2", "grid_complex_spatial_differencing", 16, extra={"orderOfSpatialDifferencing": 2})
    gen_packing("g2_csd1_bitmap", "grid_complex_spatial_differencing", 16, bitmap=True,
                extra={"orderOfSpatialDifferencing": 1})
    gen_packing("g2_csd2_bitmap", "grid_complex_spatial_differencing", 16, bitmap=True,
                extra={"orderOfSpatialDifferencing": 2})
    gen_packing("g2_csd2_const", "grid_complex_spatial_differencing", 16, const=True,
                extra={"orderOfSpatialDifferencing": 2})
    gen_packing("g2_jpeg16", "grid_jpeg", 16)
    gen_packing("g2_jpeg12", "grid_jpeg", 12)
    gen_packing("g2_jpeg_bitmap", "grid_jpeg", 16, bitmap=True)
    gen_packing("g2_ccsds16", "grid_ccsds", 16)
    gen_packing("g2_ccsds12", "grid_ccsds", 12)
    gen_packing("g2_ccsds24", "grid_ccsds", 24)
    gen_packing("g2_ccsds_bitmap", "grid_ccsds", 16, bitmap=True)
    gen_packing("g2_ieee32", "grid_ieee", 16, extra={"precision": 1})
    gen_packing("g2_ieee64", "grid_ieee", 16, extra={"precision": 2})
    gen_packing("g2_png16_noisy", "grid_png", 16)
    gen_packing("g2_png16", "grid_png", 16, smooth=True)
    gen_packing("g2_png8", "grid_png", 8, smooth=True)
    gen_packing("g2_png24", "grid_png", 24, smooth=True)
    gen_packing("g2_png_bitmap", "grid_png", 16, smooth=True, bitmap=True)
    # south-to-north scanning (jScansPositively=1) to check coordinates and row order
    gen_packing("g2_simple_s2n", "grid_simple", 16, lat0=-90.0, lat1=90.0)

    # decimal scale factor D != 0 (NCEP writes most fields so), and negative values
    gen_packing("g2_simple16_neg", "grid_simple", 16, offset=-300.0)
    gen_packing("g2_csd2_neg", "grid_complex_spatial_differencing", 16, offset=-300.0,
                extra={"orderOfSpatialDifferencing": 2})
    for src in ["g2_simple16", "g2_simple12", "g2_complex", "g2_complex_bitmap", "g2_csd1", "g2_csd2",
                "g2_csd2_bitmap", "g2_jpeg16", "g2_jpeg_bitmap", "g2_ccsds16", "g2_ccsds_bitmap",
                "g2_png16", "g2_simple16_neg", "g2_csd2_neg"]:
        for d in (1, 2, 3, -2):
            patch_decimal(src, "%s_D%s" % (src, str(d).replace("-", "m")), d)

    # --- GRIB2 other grids --------------------------------------------------------------------
    def reduced_gg(name, packing, sample="reduced_gg_pl_32_grib2", ext="grib2"):
        def fn():
            h = ec.codes_grib_new_from_samples(sample)
            common_keys(h)
            la, lo = latlon_of(h)
            pack(h, field(la, lo), packing, 16)
            write_file(name, [h], ext)
        attempt(name, fn)
    reduced_gg("g2_reduced_gg", "grid_simple")
    reduced_gg("g2_reduced_gg_ccsds", "grid_ccsds")

    def regular_gg():
        h = ec.codes_grib_new_from_samples("regular_gg_pl_grib2")
        common_keys(h)
        la, lo = latlon_of(h)
        pack(h, field(la, lo), "grid_simple", 16)
        write_file("g2_regular_gg", [h], "grib2")
    attempt("g2_regular_gg", regular_gg)

    def rotated(name, sample, ext):
        def fn():
            h = ec.codes_grib_new_from_samples(sample)
            common_keys(h)
            set_regular_ll(h, 40, 30, lat0=-10.0, lat1=19.0, lon0=-20.0, dlon=1.0)
            ec.codes_set(h, "latitudeOfSouthernPoleInDegrees", -40.0)
            ec.codes_set(h, "longitudeOfSouthernPoleInDegrees", 10.0)
            la, lo = latlon_of(h)
            pack(h, field(la, lo), "grid_simple", 16)
            write_file(name, [h], ext)
        attempt(name, fn)
    rotated("g2_rotated_ll", "rotated_ll_sfc_grib2", "grib2")

    def polar(name, sample, ext):
        def fn():
            h = ec.codes_grib_new_from_samples(sample)
            common_keys(h)
            for k, v in [("Nx", 50), ("Ny", 40), ("latitudeOfFirstGridPointInDegrees", 30.0),
                         ("longitudeOfFirstGridPointInDegrees", 250.0), ("DxInMetres", 100000),
                         ("DyInMetres", 100000), ("orientationOfTheGridInDegrees", 255.0)]:
                ec.codes_set(h, k, v)
            # first point is the south-west corner, rows run northwards (as NCEP writes them);
            # with jScansPositively=0 ecCodes still walks northwards, against the WMO spec
            ec.codes_set(h, "jScansPositively", 1)
            if ext == "grib2":
                ec.codes_set(h, "LaDInDegrees", 60.0)
            fix_npoints(h, 50 * 40)
            la, lo = latlon_of(h)
            pack(h, field(la, lo), "grid_simple", 16)
            write_file(name, [h], ext)
        attempt(name, fn)
    polar("g2_polar_stereo", "polar_stereographic_sfc_grib2", "grib2")

    def lambert():
        h = ec.codes_grib_new_from_samples("regular_ll_sfc_grib2")
        common_keys(h)
        ec.codes_set(h, "gridType", "lambert")
        for k, v in [("Nx", 60), ("Ny", 45), ("latitudeOfFirstGridPointInDegrees", 20.0),
                     ("longitudeOfFirstGridPointInDegrees", 235.0), ("LaDInDegrees", 38.5),
                     ("LoVInDegrees", 262.5), ("Latin1InDegrees", 38.5), ("Latin2InDegrees", 38.5),
                     ("DxInMetres", 50000), ("DyInMetres", 50000)]:
            ec.codes_set(h, k, v)
        ec.codes_set(h, "jScansPositively", 1)
        fix_npoints(h, 60 * 45)
        la, lo = latlon_of(h)
        pack(h, field(la, lo), "grid_simple", 16)
        write_file("g2_lambert", [h], "grib2")
    attempt("g2_lambert", lambert)

    def mercator():
        h = ec.codes_grib_new_from_samples("regular_ll_sfc_grib2")
        common_keys(h)
        ec.codes_set(h, "gridType", "mercator")
        for k, v in [("Ni", 50), ("Nj", 40), ("latitudeOfFirstGridPointInDegrees", -20.0),
                     ("longitudeOfFirstGridPointInDegrees", 100.0), ("LaDInDegrees", 20.0),
                     ("latitudeOfLastGridPointInDegrees", 20.6), ("longitudeOfLastGridPointInDegrees", 146.0),
                     ("DiInMetres", 100000), ("DjInMetres", 100000), ("orientationOfTheGridInDegrees", 0.0)]:
            ec.codes_set(h, k, v)
        ec.codes_set(h, "jScansPositively", 1)
        fix_npoints(h, 50 * 40)
        la, lo = latlon_of(h)
        # make the last grid point consistent with first point + Di/Dj (ecCodes walks from the first)
        ec.codes_set(h, "latitudeOfLastGridPointInDegrees", round(float(la[-1]), 6))
        ec.codes_set(h, "longitudeOfLastGridPointInDegrees", round(float(lo[-1]), 6))
        la, lo = latlon_of(h)
        pack(h, field(la, lo), "grid_simple", 16)
        write_file("g2_mercator", [h], "grib2")
    attempt("g2_mercator", mercator)

    # --- several messages in one file, and a non-zero forecast time / pressure level --------
    def multi_msg():
        hs = []
        for i, (pk, lev, step) in enumerate([("grid_simple", 500, 0), ("grid_ccsds", 850, 6),
                                              ("grid_complex_spatial_differencing", 1000, 12),
                                              ("grid_jpeg", 250, 24)]):
            h = new_ll("regular_ll_pl_grib2")
            ec.codes_set(h, "level", lev)
            ec.codes_set(h, "forecastTime", step)
            ec.codes_set(h, "parameterNumber", i)
            la, lo = latlon_of(h)
            pack(h, field(la, lo), pk, 16)
            hs.append(h)
        write_file("g2_multi_msg", hs, "grib2")
    attempt("g2_multi_msg", multi_msg)

    # --- ECMWF-style: local use section (section 2), accumulation (PDT 4.8), ensemble (PDT 4.1)
    def pdt(name, keys):
        def fn():
            h = new_ll("regular_ll_sfc_grib2")
            for k, v in keys:
                ec.codes_set(h, k, v)
            la, lo = latlon_of(h)
            pack(h, field(la, lo), "grid_ccsds", 16)
            write_file(name, [h], "grib2")
        attempt(name, fn)
    pdt("g2_local_section", [("setLocalDefinition", 1), ("localDefinitionNumber", 1)])
    pdt("g2_pdt8_accum", [("productDefinitionTemplateNumber", 8), ("stepType", "accum"), ("stepRange", "0-6")])
    pdt("g2_pdt1_ensemble", [("productDefinitionTemplateNumber", 1), ("number", 5), ("numberOfForecastsInEnsemble", 51)])

    # --- a GRIB2 message holding two fields (sections 4-7 repeated), as NCEP writes U/V ---
    def multi_field():
        mh = ec.codes_grib_multi_new()
        for i in range(2):
            h = new_ll("regular_ll_pl_grib2")
            ec.codes_set(h, "parameterCategory", 2)
            ec.codes_set(h, "parameterNumber", 2 + i)
            la, lo = latlon_of(h)
            pack(h, field(la, lo) - 273 + 5 * i, "grid_simple", 16)
            ec.codes_grib_multi_append(h, 4, mh)
            ec.codes_release(h)
        path = os.path.join(OUT, "g2_multi_field.grib2")
        with open(path, "wb") as f:
            ec.codes_grib_multi_write(mh, f)
        ec.codes_grib_multi_release(mh)
        record("g2_multi_field", path, multi=True)
    attempt("g2_multi_field", multi_field)

    # --- GRIB1 ---------------------------------------------------------------------------------
    gen_packing("g1_simple", "grid_simple", 16, sample="regular_ll_pl_grib1", ext="grib1")
    gen_packing("g1_simple12", "grid_simple", 12, sample="regular_ll_pl_grib1", ext="grib1")
    gen_packing("g1_simple_const", "grid_simple", 16, sample="regular_ll_pl_grib1", ext="grib1", const=True)
    gen_packing("g1_simple_bitmap", "grid_simple", 16, sample="regular_ll_pl_grib1", ext="grib1", bitmap=True)
    gen_packing("g1_second_order", "grid_second_order", 16, sample="regular_ll_pl_grib1", ext="grib1")
    gen_packing("g1_simple_s2n", "grid_simple", 16, sample="regular_ll_pl_grib1", ext="grib1", lat0=-90.0, lat1=90.0)
    reduced_gg("g1_reduced_gg", "grid_simple", sample="reduced_gg_pl_32_grib1", ext="grib1")
    rotated("g1_rotated_ll", "rotated_ll_pl_grib1", "grib1")
    polar("g1_polar_stereo", "polar_stereographic_pl_grib1", "grib1")

    # --- large fields for timing (0.25 degree global, 721 x 1440) ------------------------------
    if big:
        for name, pk, extra in [("big_simple", "grid_simple", None),
                                ("big_csd2", "grid_complex_spatial_differencing", {"orderOfSpatialDifferencing": 2}),
                                ("big_jpeg", "grid_jpeg", None),
                                ("big_ccsds", "grid_ccsds", None)]:
            def fn(name=name, pk=pk, extra=extra):
                h = new_ll("regular_ll_sfc_grib2", 1440, 721, dlon=0.25)
                la, lo = latlon_of(h)
                pack(h, field(la, lo, noise=0.2), pk, 16, extra=extra)
                write_file(name, [h], "grib2")
            attempt(name, fn)

    for name, status, info in REPORT:
        print("%-22s %s %s" % (name, status, info))


if __name__ == "__main__":
    main("--big" in sys.argv)
