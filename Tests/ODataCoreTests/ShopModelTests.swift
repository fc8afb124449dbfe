import Testing

@testable import ODataCore

@Suite struct ShopModelTests {
    let model = ShopFixture.model

    @Test func inheritanceAbstractAndOpenTypes() throws {
        #expect(model.version == .v4 && model.edmxVersion == "4.01")
        #expect(model.key(of: "Shop.Model.Employee") == ["ID"])
        #expect(model.structuredType("Shop.Model.Employee")?.key == [])
        #expect(model.keyProperties(of: "Shop.Employee").map(\.type.primitive) == [.int32])
        #expect(
            model.properties(of: "Shop.Model.Employee").map(\.name).prefix(3) == ["ID", "Name", "Address"])
        #expect(model.structuredType("Shop.Model.Customer")?.isOpen == true)
        #expect(model.structuredType("Shop.Model.Document")?.isAbstract == true)
        #expect(model.structuredType("Shop.Model.Document")?.hasStream == true)
        #expect(model.key(of: "Shop.Model.Invoice") == ["ID"])
        #expect(
            model.derivedTypes(of: "Shop.Person").map(\.qualifiedName) == [
                "Shop.Model.Customer", "Shop.Model.Employee",
            ])
        #expect(model.typeAndDerived("Shop.Model.Document") == ["Shop.Model.Document", "Shop.Model.Invoice"])
        #expect(model.derivedTypes(of: "Shop.Model.Product").isEmpty)
        #expect(model.isType("Shop.Model.Employee", derivedFrom: "Shop.Person"))
        #expect(!model.isType("Shop.Model.Person", derivedFrom: "Shop.Employee"))
    }

    @Test func complexTypesNestedAndDerived() throws {
        let address = try #require(model.structuredType("Shop.Model.Address"))
        #expect(!address.isEntity && address.properties.map(\.name) == ["Street", "City", "Geo"])
        #expect(model.property(named: "Geo", in: "Shop.Address")?.type.name == "Shop.Model.GeoPoint")
        #expect(
            model.properties(of: "Shop.Model.PostalAddress").map(\.name) == [
                "Street", "City", "Geo", "PostBox",
            ])
        #expect(model.isType("Shop.Model.PostalAddress", derivedFrom: "Shop.Model.Address"))
        let addresses = try #require(model.property(named: "Addresses", in: "Shop.Model.Person"))
        #expect(addresses.type == EdmTypeRef(name: "Shop.Model.Address", isCollection: true))
        let emails = try #require(model.property(named: "Emails", in: "Shop.Model.Customer"))
        #expect(emails.type.isCollection && emails.type.primitive == .string)
    }

    @Test func enumsAndTypeDefinitions() throws {
        let color = try #require(model.enumTypes["Shop.Model.Color"])
        #expect(color.isFlags && color.underlyingType == "Edm.Int32")
        #expect(color.value(ofLiteral: "Red,Blue") == 5)
        #expect(color.value(ofLiteral: "Red, Green") == 3)
        #expect(color.value(ofLiteral: "6") == 6)
        #expect(color.value(ofLiteral: "Purple") == nil)
        #expect(color.names(for: 5) == "Red,Blue")
        #expect(color.names(for: 2) == "Green")
        #expect(color.names(for: 8) == "8")
        let status = try #require(model.enumTypes["Shop.Model.Status"])
        #expect(!status.isFlags && status.members.map(\.value) == [0, 1, 2])
        #expect(status.value(ofLiteral: "Open,Closed") == nil)
        #expect(model.enumType(EdmTypeRef(name: "Shop.Status"))?.name == "Status")

        let money = try #require(model.typeDefinitions["Shop.Model.Money"])
        #expect(money.underlyingType == "Edm.Decimal" && money.precision == 38 && money.scale == 10)
        let salary = try #require(model.property(named: "Salary", in: "Shop.Model.Employee"))
        #expect(salary.type.primitive == .decimal && salary.typeDefinition == "Shop.Model.Money")
        #expect(salary.precision == 38 && salary.scale == 10)
        let sku = try #require(model.property(named: "Sku", in: "Shop.Model.Product"))
        #expect(sku.type.primitive == .string && sku.maxLength == 16 && sku.isUnicode == false)
        #expect(model.primitiveType(of: EdmTypeRef(name: "Shop.Sku")) == .string)
    }

    @Test func everyPrimitiveType() throws {
        let expected: [String: EdmPrimitiveType] = [
            "Price": .decimal, "ShelfLife": .duration, "ReleaseDate": .date, "AvailableFrom": .timeOfDay,
            "Created": .dateTimeOffset, "Rating": .double, "Weight": .single, "Stock": .int64, "Code": .guid,
            "Thumbnail": .binary, "Discontinued": .boolean, "Small": .byte, "Tiny": .sbyte, "Units": .int16,
            "Location": .geographyPoint, "Photo": .stream, "Extra": .untyped,
        ]
        for (name, type) in expected {
            #expect(model.property(named: name, in: "Shop.Model.Product")?.type.primitive == type, "\(name)")
        }
        let price = try #require(model.property(named: "Price", in: "Shop.Model.Product"))
        #expect(price.isScaleVariable && price.scale == nil && price.precision == 38)
        #expect(model.property(named: "Location", in: "Shop.Model.Product")?.srid == "4326")
        #expect(EdmPrimitiveType.geographyPoint.isSpatial && !EdmPrimitiveType.guid.isSpatial)
        for p in EdmPrimitiveType.allCases { #expect(EdmPrimitiveType(rawValue: p.rawValue) == p) }
    }

    @Test func singletonsContainmentAndBindings() throws {
        let company = try #require(model.entitySet(named: "Company"))
        #expect(company.isSingleton && company.entityType == "Shop.Model.Company")
        #expect(model.targetEntitySet(from: company, navigationPath: "Departments")?.name == "Departments")
        let lines = try #require(model.navigationProperty(named: "Lines", in: "Shop.Model.Order"))
        #expect(lines.containsTarget && lines.isCollection && lines.target == "Shop.Model.OrderLine")
        #expect(model.containmentNavigations(of: "Shop.Model.Order").map(\.name) == ["Lines"])
        let people = try #require(model.entitySet(named: "People"))
        #expect(
            model.targetEntitySet(from: people, navigation: "Manager", on: "Shop.Model.Employee")?.name
                == "People")
        #expect(
            model.targetEntitySet(from: people, navigation: "Orders", on: "Shop.Model.Customer")?.name
                == "Orders")
        #expect(
            model.targetEntitySet(from: people, navigation: "Friends", on: "Shop.Model.Employee")?.name
                == "People")
        let orders = try #require(model.entitySet(named: "Orders"))
        #expect(model.targetEntitySet(from: orders, navigationPath: "Lines/Product")?.name == "Products")
    }

    @Test func partnersInBothDirections() throws {
        // Declared on both sides.
        #expect(model.navigationProperty(named: "Manager", in: "Shop.Model.Employee")?.partner == "Reports")
        #expect(model.navigationProperty(named: "Reports", in: "Shop.Model.Employee")?.partner == "Manager")
        // Declared on one side only: the other side learns it.
        #expect(
            model.navigationProperty(named: "Staff", in: "Shop.Model.Department")?.partner == "Department")
        #expect(model.navigationProperty(named: "Department", in: "Shop.Model.Employee")?.partner == "Staff")
        // And the constraint is derived from the partner's, reversed.
        let staff = try #require(model.navigationProperty(named: "Staff", in: "Shop.Model.Department"))
        #expect(staff.referentialConstraints == [.init(property: "ID", referencedProperty: "DepartmentID")])
        let orders = try #require(model.navigationProperty(named: "Orders", in: "Shop.Model.Customer"))
        #expect(orders.referentialConstraints == [.init(property: "ID", referencedProperty: "CustomerID")])
        // No partner anywhere: stays nil.
        #expect(model.navigationProperty(named: "Friends", in: "Shop.Model.Person")?.partner == nil)
    }
}

@Suite struct SAPV2ModelTests {
    let model = Fixtures.sapV2Model

    @Test func associationsMapToTheSameModel() throws {
        // V2 navigation resolves to the same fields a V4 model has: target, multiplicity, partner,
        // constraints, bindings.
        for type in model.entityTypes {
            for nav in type.navigationProperties {
                #expect(!nav.target.isEmpty, "\(type.name).\(nav.name) has a target")
                #expect(model.structuredType(nav.target) != nil, "\(nav.target) resolves")
                if let partner = nav.partner {
                    let back = try #require(model.navigationProperty(named: partner, in: nav.target))
                    #expect(back.partner == nav.name)
                    #expect(model.isType(type.qualifiedName, derivedFrom: back.target))
                }
            }
        }
        let orders = try #require(model.navigationProperty(named: "Orders", in: "EXAMPLE_SRV.Customer"))
        #expect(orders.isCollection && !orders.containsTarget)
        #expect(model.entitySet(named: "Customers")?.navigationBindings["Orders"] == "Orders")
    }

    @Test func sapAnnotationsKept() throws {
        let set = try #require(model.entitySet(named: "Cars"))
        #expect(set.annotations["sap:pageable"] == "false")
        let sensor = try #require(model.property(named: "Sensor", in: "EXAMPLE_SRV.TemperatureMeasurement"))
        #expect(sensor.annotations.keys.contains { $0.hasPrefix("sap:") })
    }
}
