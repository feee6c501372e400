package reference

import (
	"reflect"

	"github.com/portico-lb/portico/providers"
)

// clone returns a deep copy of lb, so that neither the caller nor a test reading Desired can
// change what the provider stored.
//
// It copies by reflection rather than field by field so that fields added to the model later,
// and whatever provider options LoadBalancer.Options holds, are copied too. Unexported fields are copied by value, which is right
// for the immutable values that have them (netip.Addr, netip.Prefix).
func clone(lb *providers.LoadBalancer) *providers.LoadBalancer {
	if lb == nil {
		return nil
	}
	out := new(providers.LoadBalancer)
	deepCopy(reflect.ValueOf(out).Elem(), reflect.ValueOf(lb).Elem())
	return out
}

// deepCopy sets dst, which must be settable, to a deep copy of src.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		n := reflect.New(src.Type().Elem())
		deepCopy(n.Elem(), src.Elem())
		dst.Set(n)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		n := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopy(n.Index(i), src.Index(i))
		}
		dst.Set(n)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		n := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			v := reflect.New(src.Type().Elem()).Elem()
			deepCopy(v, it.Value())
			n.SetMapIndex(it.Key(), v)
		}
		dst.Set(n)
	case reflect.Struct:
		dst.Set(src)
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Array:
		for i := range src.Len() {
			deepCopy(dst.Index(i), src.Index(i))
		}
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		deepCopy(v, src.Elem())
		dst.Set(v)
	default:
		dst.Set(src)
	}
}
